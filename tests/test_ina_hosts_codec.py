"""INA wire codec, fixed point and the worker policy (wire/ina.py, wire/fixedpoint.py,
hosts/ina/worker.py); rig: ``tests/ina_loopback.py``.
"""

from __future__ import annotations

import json
import socket
import struct

import numpy as np
import pytest

from hosts.ina.worker import (
    Policy,
    PolicyError,
    SwitchRef,
    Worker,
)
from tests.ina_loopback import (
    PORT,
    S,
    net,
)
from wire import scapy_layers
from wire.fixedpoint import (
    FixedPointOverflow,
    dequantize,
    max_abs_q,
    max_scale_bits,
    num_fragments,
    pad_to_fragments,
    quantize,
)
from wire.ina import (
    INA_HEADER,
    INA_HEADER_LEN,
    INA_PACKET_LEN,
    INA_VALUES,
    InaDecodeError,
    InaFlags,
    MsgType,
    decode_ina,
    decode_ina_header,
    encode_ina,
)

__all__ = ["net"]  # the fixture, imported

# ============================================================================ codec


def _random_fields(rng: np.random.Generator) -> dict:
    return {
        "msg_type": int(rng.integers(1, 4)),  # GRAD, PARTIAL, RESULT: with values
        "job_id": int(rng.integers(0, 256)),
        "worker_id": int(rng.integers(0, 256)),
        "fragment": int(rng.integers(0, 2**32)),
        "tag": int(rng.integers(0, 2**16)),
        "origin": int(rng.integers(0, 2**16)),
        "bitmap": int.from_bytes(rng.bytes(32), "big"),  # 256 contributors
        "count": int(rng.integers(0, 2**16)),
        "fanin": int(rng.integers(0, 2**16)),
        "flags": int(rng.integers(0, 4)),
        "sd_fanin": int(rng.integers(0, 2**16)),
        "max_exp": int(rng.integers(0, 256)),
    }


def test_scapy_and_fast_codec_agree_byte_for_byte():
    from scapy.layers.inet import IP, UDP

    rng = np.random.default_rng(1)
    for _ in range(50):
        fields = _random_fields(rng)
        vals = rng.integers(-(2**31), 2**31, size=INA_VALUES, dtype=np.int64).astype(np.int32)
        vals[:2] = [-(2**31), 2**31 - 1]
        fast = encode_ina(**fields, values=vals)
        sc = bytes(scapy_layers.INA(**fields) / scapy_layers.INAValues(values=[int(v) for v in vals]))
        assert fast == sc and len(fast) == INA_PACKET_LEN == 308
        hdr, dv = decode_ina(sc)
        assert hdr._asdict() == fields
        assert dv.dtype == np.int32 and np.array_equal(dv, vals)
        # scapy dissects what the fast codec wrote
        ina = scapy_layers.INA(fast)
        assert {k: int(ina.getfieldval(k)) for k in fields} == fields
        assert [int(v) for v in ina[scapy_layers.INAValues].values] == vals.tolist()
        # the same header as a CLEAR: no values on either side
        fields["msg_type"] = int(MsgType.CLEAR)
        clear = encode_ina(**fields)
        assert clear == bytes(scapy_layers.INA(**fields)) and len(clear) == 52
        assert scapy_layers.INAValues not in scapy_layers.INA(clear)
        # a NACK likewise (loss recovery: header only, both directions)
        fields["msg_type"] = int(MsgType.NACK)
        nack = encode_ina(**fields)
        assert nack == bytes(scapy_layers.INA(**fields)) and len(nack) == 52
        assert decode_ina_header(nack)._asdict() == fields
    # UDP()/INA() gets dport 40000 from the binding (dissection by port is not checked:
    # tests/p4/packets.py binds a test header to the same port in the same session)
    udp = UDP(bytes(IP(dst="10.0.0.1") / UDP(sport=1234) / scapy_layers.INA())[20:28])
    assert udp.dport == PORT


def test_codec_edges():
    assert INA_HEADER_LEN == 52 and len(scapy_layers.INA()) == 52
    # a CLEAR is the header alone (the P4 parser extracts no values for it)
    clear = encode_ina(MsgType.CLEAR, 3, tag=5)
    assert clear == INA_HEADER.pack(4, 3, 0, 0, 5, 0, 0, 0, 0, 0, 0)
    hdr, vals = decode_ina(clear)
    assert (hdr.msg_type, hdr.tag) == (MsgType.CLEAR, 5) and not vals.any()
    with pytest.raises(ValueError):
        encode_ina(MsgType.CLEAR, 3, values=np.zeros(INA_VALUES, np.int32))
    # a NACK: the PS asks worker 2 (bit 2) for fragment 7, or a worker asks for its
    # RESULT; header only, type 5, fields where every other message has them
    nack = encode_ina(MsgType.NACK, 3, worker_id=2, fragment=7, bitmap=1 << 2, count=1)
    assert nack == INA_HEADER.pack(5, 3, 2, 7, 0, 0, 4, 1, 0, 0, 0) and len(nack) == 52
    assert nack[0] == 5 and nack[4:8] == (7).to_bytes(4, "big") and nack[12:44] == (4).to_bytes(32, "big")
    hdr, vals = decode_ina(nack)
    assert (hdr.msg_type, hdr.fragment, hdr.bitmap, hdr.worker_id) == (MsgType.NACK, 7, 4, 2)
    assert not vals.any()
    with pytest.raises(ValueError):
        encode_ina(MsgType.NACK, 3, values=np.zeros(INA_VALUES, np.int32))
    with pytest.raises(InaDecodeError):  # only a CLEAR or NACK may be that short
        decode_ina(INA_HEADER.pack(1, 3, 0, 0, 5, 0, 0, 0, 0, 0, 0))
    raw = bytes(range(256))
    assert encode_ina(1, 1, values=raw)[52:] == raw
    with pytest.raises(InaDecodeError):
        decode_ina(bytes(INA_PACKET_LEN - 1))
    hdr, _ = decode_ina(encode_ina(1, 2) + b"\x00" * 6)  # trailing padding is ignored
    assert hdr.job_id == 2
    with pytest.raises(ValueError):
        encode_ina(1, 1, values=np.zeros(INA_VALUES - 1, np.int32))
    with pytest.raises(ValueError):
        encode_ina(1, 1, values=np.zeros(INA_VALUES, np.float32))
    with pytest.raises(ValueError):
        bytes(scapy_layers.INAValues(values=[1, 2, 3]))
    assert scapy_layers.INA(flags="RETX+VIA_SD").flags == InaFlags.RETX | InaFlags.VIA_SD
    # flags, sd_fanin (16 bits), max_exp end the header
    assert bytes(scapy_layers.INA(flags="VIA_SD", sd_fanin=7, max_exp=9))[48:52] == b"\x02\x00\x07\x09"
    with pytest.raises(struct.error):  # rank 256 has no bit
        INA_HEADER.pack(1, 1, 0, 0, 0, 0, 1 << 256, 1, 0, 0, 0)


# ============================================================================ fixed point


def test_fixed_point_roundtrip_and_padding():
    g = np.array([0.5, -0.25, 1e-6, -3.0, 2.0**-17, 3 * 2.0**-17], dtype=np.float32)
    q = quantize(g, S, 4)
    assert q.dtype == np.int32
    assert q.tolist() == [32768, -16384, 0, -196608, 0, 2]  # ties to even
    assert np.array_equal(dequantize(q, S), (q / 65536).astype(np.float32))
    p = pad_to_fragments(q)
    assert p.size == INA_VALUES and p[:6].tolist() == q.tolist() and not p[6:].any()
    assert num_fragments(0) == 0 and num_fragments(INA_VALUES) == 1 and num_fragments(INA_VALUES + 1) == 2


def test_fixed_point_overflow_names_the_scale():
    n = 8
    bound = max_abs_q(n)
    assert bound == (2**31 - 1) // 8
    edge = np.float32(bound - 15)  # float32 steps are 16 apart here: the largest below
    assert quantize(np.array([edge, -edge]), 0, n).tolist() == [bound - 15, 15 - bound]
    with pytest.raises(FixedPointOverflow, match="even scale 0"):
        quantize(np.array([np.float32(bound + 1)]), 0, n)
    g = np.array([0.1, -5000.0], dtype=np.float32)
    with pytest.raises(FixedPointOverflow) as e:
        quantize(g, S, n)
    s = max_scale_bits(g, n)
    assert s == 15 and f"--scale-bits {s}" in str(e.value) and "8 workers" in str(e.value)
    quantize(g, s, n)
    with pytest.raises(FixedPointOverflow, match="even scale 0"):
        quantize(np.array([3e38], np.float32), 0, 2)
    with pytest.raises(ValueError, match="non-finite"):
        quantize(np.array([0.0, np.nan], np.float32), S, 2)
    with pytest.raises(ValueError, match="floating"):
        quantize(np.array([1, 2]), S, 2)


def test_worker_overflow_sends_nothing(net):
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind((net(1), PORT))
    sink.settimeout(0.2)
    with Worker(0, 4, 1, net(1), bind_ip=net(2), scale_bits=S) as w, pytest.raises(
        FixedPointOverflow, match="--scale-bits"
    ):
        w.allreduce(np.array([1e5], dtype=np.float32))
    with pytest.raises(TimeoutError):
        sink.recv(2048)
    sink.close()


# ============================================================================ policy


def test_policy_roundtrip_and_derived_tables():
    d = {
        "job": 3, "ps": "10.0.0.1", "workers": ["10.0.0.2", "10.0.0.3", "10.0.0.4"],
        "num_fragments": 4, "tags": [[5, 17, 0, 5], [5, 17, 0, 0], 0],
        "fanin": {"17": [2, 3, 0, 0]}, "sd": {"id": 17}, "partial_tags": {"5": [17, 0, 0, 0]},
    }
    p = Policy.from_dict(d)
    assert p.switch_ips == {5: "10.255.0.5", 17: "10.255.0.17"} and p.sd == SwitchRef(17, "10.255.0.17")
    assert p.fanin[5].tolist() == [2, 0, 0, 1]  # derived: workers tagging (5, f)
    r0 = p.for_worker(0)
    assert r0.tags.tolist() == [5, 17, 0, 5] and r0.fanin.tolist() == [2, 3, 0, 1]
    # fragment 0: switch 5's aggregate is merged again at s_d, which expects 2
    assert r0.flags.tolist() == [InaFlags.VIA_SD, 0, 0, 0] and r0.sd_fanin.tolist() == [2, 0, 0, 0]
    with pytest.raises(PolicyError, match=r"fanin\[17\]\[0\] = 1 but switch 17 gets 2"):
        Policy.from_dict({**d, "fanin": {"17": [1, 3, 0, 0]}})
    with pytest.raises(PolicyError, match=r"partial_tags\[5\]\[1\] = 6"):
        Policy.from_dict({**d, "partial_tags": {"5": [17, 6, 0, 0]}})
    assert Policy.from_dict({**d, "fanin": {}}).fanin[17].tolist() == [2, 2, 0, 0]  # derived
    assert p.for_worker(2).fanin.tolist() == [0, 0, 0, 0]
    assert {s: f.tolist() for s, f in p.clear_targets().items()} == {5: [0, 3]}
    again = Policy.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again.to_dict() == p.to_dict() and again.to_dict()["tags"][2] == 0
    no_sd = Policy.from_dict({**d, "sd": None, "partial_tags": None})
    assert no_sd.clear_targets()[17].tolist() == [1] and not no_sd.for_worker(0).flags.any()


@pytest.mark.parametrize(
    ("patch", "msg"),
    [
        ({"workers": ["10.0.0.2", "nope"]}, r"workers\[1\]"),
        ({"tags": [[0, 0, 0], 0]}, "num_fragments = 4"),
        ({"tags": [[5, 5, 0, 0], [5, 0, 0, 0]], "fanin": {"5": [1, 1, 0, 0]}}, r"fanin\[5\]\[0\] = 1"),
        ({"partial_tags": {"5": 9}}, r"partial_tags\[5\]\[0\] = 9"),  # no s_d configured
        ({"fanin": {"5": 300}}, "outside 0..256"),
        ({"format": "float"}, "format"),
        ({"job": 256}, "job"),
        ({"version": 2}, "version"),
        ({"workers": []}, "workers"),
    ],
)
def test_policy_errors(patch, msg):
    d = {"job": 1, "ps": "10.0.0.1", "workers": ["10.0.0.2", "10.0.0.3"], "num_fragments": 4}
    with pytest.raises(PolicyError, match=msg):
        Policy.from_dict({**d, **patch})

