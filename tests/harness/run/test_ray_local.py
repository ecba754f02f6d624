"""A Ray instance `tvr run --executor ray` starts on this machine listens on loopback only
(it has no authentication: on every interface, anyone who reaches the machine could run code
in it), and leaves no session folder behind. Checked on the real processes: every TCP and
UDP socket bound by the run's process and its descendants, read from /proc while it runs."""

from __future__ import annotations

import glob
import ipaddress
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.run.raywatch import descendants

pytest.importorskip("ray", reason="ray is not installed (pip install 'tvr-bench[cluster]')")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray"),
              pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs /proc")]

SUITE = """name = "ray-loopback"
[[grid]]
measure = "seq-ops"
mixers = ["lstm"]
seq_len = [8, 16]
d_model = 8
batch_size = 1
"""


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net's address: IPv4 in one little-endian word, IPv6 in four."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def _bound() -> dict[str, tuple[str, int]]:
    """socket inode -> (address, port) of every listening TCP and bound UDP socket."""
    found = {}
    for table, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, st, inode = fields[1], fields[3], fields[9]
            address, port = local.split(":")
            if st == state and int(port, 16):
                found[inode] = (str(_address(address)), int(port, 16))
    return found


def _listening(pid: int) -> set[tuple[int, str, str, int]]:
    """(pid, name, address, port) of what `pid` and its descendants listen on now."""
    bound, out = _bound(), set()
    for p in [pid, *descendants(pid)]:
        try:
            name = Path(f"/proc/{p}/comm").read_text().strip()
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue  # ended meanwhile
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{p}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in bound:
                out.add((p, name, *bound[target[8:-1]]))
    return out


def test_a_local_ray_instance_listens_on_loopback_only_and_leaves_no_session(
        tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    before = set(glob.glob("/tmp/ray/session_*"))
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--suite-file", str(suite), "--out",
         str(tmp_path / "out"), "--executor", "ray", "--tracking-uri", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen: set[tuple[int, str, str, int]] = set()
    while run.poll() is None:
        seen |= _listening(run.pid)
        time.sleep(0.3)
    output = run.stdout.read()
    assert run.returncode == 0, output
    assert any(name == "gcs_server" for _, name, _, _ in seen), (seen, output)  # Ray was seen
    wide = sorted(s for s in seen if not ipaddress.ip_address(s[2]).is_loopback)
    assert not wide, f"listening beyond loopback: {wide}"
    # its session: in a folder of its own, removed with it (and none added to /tmp/ray)
    left = f"{os.environ.get('RAY_TMPDIR') or tempfile.gettempdir()}/tvr-ray-{run.pid}-*"
    deadline = time.monotonic() + 20
    while glob.glob(left) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not glob.glob(left)
    assert not {s for s in set(glob.glob("/tmp/ray/session_*")) - before
                if s.endswith(f"_{run.pid}")}
