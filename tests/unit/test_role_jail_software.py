"""The role jail_software's interface: its argument spec and its defaults agree, and every variable the planner reads
is one of the spec's."""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "jail_software")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as f:
        return yaml.safe_load(f)


def test_the_argument_spec_and_the_defaults_agree():
    options = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load("defaults", "main.yml")
    assert set(defaults) == set(k for k, v in options.items() if "default" in v)
    for key, value in defaults.items():
        assert options[key]["default"] == value, key
    assert all(k.startswith("jail_software_") for k in options)


def test_the_planner_reads_the_roles_variables():
    request = load("vars", "main.yml")["_jail_software_request"]
    options = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for key, template in request.items():
        assert template == "{{ jail_software_%s }}" % key and "jail_software_" + key in options
