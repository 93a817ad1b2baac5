from fractions import Fraction

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import parse_quantity


@pytest.mark.parametrize("text,value", [
    ("2", 2), (3, 3), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), ("4Gi", 4 * 2 ** 30), ("1k", 1000),
    ("2M", 2 * 10 ** 6), ("1e3", 1000), ("1E3", 1000), (".5", Fraction(1, 2)), ("100n", Fraction(1, 10 ** 7)),
])
def test_parse(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["lots", "-1", "1Gb", "", True])
def test_refuse(text):
    with pytest.raises(ValueError):
        parse_quantity(text)
