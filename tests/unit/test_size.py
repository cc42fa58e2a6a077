from fractions import Fraction

import pytest
from click.testing import CliRunner

from twin.cli import main
from twin.errors import UsageError
from twin.fabric.size import compare


def test_radix_512_with_8_planes_reproduces_the_paper():
    mp, tt = compare(512, 8)
    assert mp.nics == 131_072
    assert tt.nics == 65_536
    assert mp.loss_per_uplink == Fraction(1, 256)  # 0.4%
    assert mp.loss_per_nic_port == Fraction(1, 8)  # 12.5%
    assert mp.max_switch_hops == 3
    assert mp.tiers == 2 and tt.tiers == 3
    assert mp.switches == {"T0": 4096, "T1": 2048}


def test_single_plane_two_tier_is_the_plain_folded_clos():
    mp, _ = compare(64, 1)
    assert mp.nics == 64 * 32


@pytest.mark.parametrize("radix,planes", [(511, 8), (512, 0), (512, 17), (24, 8)])
def test_impossible_inputs_are_usage_errors(radix, planes):
    with pytest.raises(UsageError):
        compare(radix, planes)


def test_cli_json():
    result = CliRunner().invoke(main, ["size", "--radix", "512", "--planes", "8", "--json"])
    assert result.exit_code == 0
    assert '"nics": 131072' in result.output and '"nics": 65536' in result.output
