import pytest
from resources import make_cluster

from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.render import sshd_conf


def _render(sshd=None):
    return sshd_conf.render_sshd_config(spec.validate_cluster(make_cluster({"login": {"sshdConfig": sshd or {}}})))


def _pairs(text):
    return [tuple(line.split(" ", 1)) for line in text.splitlines() if line and not line.startswith("#")]


def test_secure_defaults():
    pairs = _pairs(_render())
    found = dict(pairs)
    assert found["ChrootDirectory"] == "/mnt/jail"
    assert found["PermitRootLogin"] == "prohibit-password"
    assert found["PasswordAuthentication"] == "no"
    assert found["AuthorizedKeysFile"] == "/mnt/jail%h/.ssh/authorized_keys"
    assert [v for k, v in pairs if k == "HostKey"] == ["/etc/soperator/ssh-host-keys/ssh_host_ed25519_key",
                                                        "/etc/soperator/ssh-host-keys/ssh_host_rsa_key"]


def test_overrides_replace_by_key_once():
    pairs = _pairs(_render({"PermitRootLogin": "no", "ClientAliveInterval": "15", "AllowGroups": "hpc admins"}))
    keys = [k for k, _v in pairs]
    assert len(keys) == len(set(k for k in keys if k != "HostKey")) + 2
    found = dict(pairs)
    assert found["PermitRootLogin"] == "no"
    assert found["ClientAliveInterval"] == "15"
    assert found["AllowGroups"] == "hpc admins"


def test_line_refuses_line_breaks():
    with pytest.raises(SpecError) as info:
        sshd_conf._line("Banner", "/etc/issue\nPermitRootLogin yes", "spec.login.sshdConfig.Banner")
    assert info.value.path == "spec.login.sshdConfig.Banner"
