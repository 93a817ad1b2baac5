"""A directory (spec.identity) never gives the images' own accounts: no idRange holds their ids, whatever the
installer's policy (refused naming the field before anything is planned); sssd filters their names; the login's keys
command is given idRange. slurm/accounts.py is the one list (tests/images/test_system_accounts.py holds it to the
built images)."""

import pytest
from resources import ldap_cluster as cluster
from resources import make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge
from ansible_collections.soperator.slurm.plugins.module_utils.render import sssd_conf
from ansible_collections.soperator.slurm.plugins.module_utils.render.sshd_conf import render_sshd_config
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import accounts

RANGE = "spec.identity.ldap.idRange"


def errors_of(obj):
    """{field: message} of what validation refuses, as the converge finds it (nothing planned)."""
    with pytest.raises(SpecErrors) as err:
        converge.plan(obj, [make_nodeset()], {"statefulsets": {}, "pods": {}, "slurm": None}, 1_700_000_000)
    return dict((e.path, e.message) for e in err.value.errors)


# --- idRange: never the images' own ids -------------------------------------------------------------------------
@pytest.mark.parametrize("low, high, named", [
    (1, 60000, "the system ids 1..999"),
    (500, 2000, "the system ids 500..999"),
    (999, 999, "the system ids 999..999"),
    (1000, 64030, "slurm (SlurmUser) 64030"),
    (64030, 64030, "slurm (SlurmUser) 64030"),
    (60001, 70000, "slurm (SlurmUser) 64030, the container image cache's owner 64031, nobody and nogroup 65534"),
    (64031, 64031, "the container image cache's owner 64031"),
    (65534, 65534, "nobody and nogroup 65534"),
    (1000, 2147483647, "slurm (SlurmUser) 64030, the container image cache's owner 64031, nobody and nogroup 65534"),
])
def test_an_id_range_holding_an_image_account_is_refused_naming_the_field(low, high, named):
    found = errors_of(cluster({"idRange": {"min": low, "max": high}}))
    assert list(found) == [RANGE], found
    assert found[RANGE].startswith("Invalid value: %d..%d holds ids of the images' own accounts (%s)"
                                   % (low, high, named)), found


@pytest.mark.parametrize("low, high", [(1000, 60000), (1000, 64029), (64032, 65533), (65535, 2147483647),
                                       (200000, 2000000)])
def test_id_ranges_clear_of_the_images_accounts_are_accepted(low, high):
    specs.validate_cluster(cluster({"idRange": {"min": low, "max": high}}))


def test_every_fixed_high_id_of_the_images_is_a_system_id():
    """The fixed ids the images' Containerfiles give (names.py) are all the list's: at or below SYSTEM_ID_MAX, or
    one of its high ids."""
    for number in (names.SLURM_UID, names.MYSQL_UID, names.SLURMRESTD_UID, names.EXPORTER_UID, 0, 990, 991):
        assert accounts.system_id(number), number
    assert accounts.system_id(accounts.SYSTEM_ID_MAX + 1) is None and accounts.system_id(60000) is None


# --- what sssd and sshd are given -----------------------------------------------------------------------------
def test_sssd_filters_every_image_account_by_name():
    text = sssd_conf.render_sssd_conf(specs.validate_cluster(cluster()))
    settings = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    assert settings["filter_users"].split(", ") == list(accounts.USERS)
    assert settings["filter_groups"].split(", ") == list(accounts.GROUPS)
    assert {"root", "slurm", "munge", "sshd", "nobody"} <= set(accounts.USERS)


def test_the_keys_command_is_given_the_id_range():
    text = render_sshd_config(specs.validate_cluster(cluster({"idRange": {"min": 10000, "max": 20000}})))
    assert "AuthorizedKeysCommand %s %%u %%U 10000 20000\n" % names.AUTHORIZED_KEYS_COMMAND in text
