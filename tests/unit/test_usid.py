import ipaddress

import pytest

from twin.fabric import usid

BLOCK = ipaddress.IPv6Network("fcbb:bb00::/32")


def test_bits_show_plane_role_and_index():
    assert usid.t1(2, 1).value == 0x2201
    assert usid.t0(0, 3).value == 0x0103
    assert usid.port(7, 5).value == 0x7305


@pytest.mark.parametrize("sid", [usid.t0(15, 255), usid.t1(0, 0), usid.port(9, 128)])
def test_decode_inverts_encode(sid):
    assert usid.USid.decode(sid.value) == sid


def test_no_usid_is_the_end_of_carrier_marker():
    assert min(usid.t0(0, 0).value, usid.t1(0, 0).value, usid.port(0, 0).value) > 0


def test_program_and_locator():
    prog = usid.program(BLOCK, [usid.t0(0, 0), usid.t1(0, 1), usid.t0(0, 1), usid.port(0, 2)])
    assert str(prog) == "fcbb:bb00:100:201:101:302::"
    assert usid.parse_program(BLOCK, prog) == [usid.t0(0, 0), usid.t1(0, 1), usid.t0(0, 1),
                                               usid.port(0, 2)]
    assert str(usid.locator(BLOCK, usid.t1(3, 1))) == "fcbb:bb00:3201::/48"
    assert usid.link_local(usid.t1(3, 1)) == "fe80::3201"


def test_program_length_is_bounded():
    with pytest.raises(ValueError):
        usid.program(BLOCK, [usid.t0(0, 0)] * 7)
