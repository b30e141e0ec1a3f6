"""The activity metrics (graphics, SM, SM occupancy, tensor, DRAM, FP64/32/16 activity) in Python:
absent with their reason where a device does not have them, values where it does (the AMD sysfs
probe over a generated tree whose binary gpu_metrics tables are packed here from the kernel's
layouts, kgd_pp_interface.h)."""
import struct

import pytest

import gpustream
from conftest import wait_for

ACTIVITY = ["graphics_activity_percent", "sm_activity_percent", "sm_occupancy_percent",
            "tensor_activity_percent", "dram_activity_percent", "fp64_activity_percent",
            "fp32_activity_percent", "fp16_activity_percent"]


def test_simulated_devices_have_no_activity_and_say_why(sim):
    for dev in sim.latest("simulated")[0].devices:
        for name in ACTIVITY:
            assert name not in dev.metrics
            assert dev.absent[name] == "unsupported"
            r = dev.reading(name)
            assert not r and r.value is None and r.reason == "unsupported"
            with pytest.raises(KeyError, match="absent"):
                dev[name]


def gpu_metrics(fmt, content, size, fields):
    """A gpu_metrics table: 0x7F everywhere (a misplaced read is beyond any percentage), the
    header, and the uint16 fields {offset: value}."""
    b = bytearray(b"\x7f" * size)
    struct.pack_into("<HBB", b, 0, size, fmt, content)
    for offset, value in fields.items():
        struct.pack_into("<H", b, offset, value)
    return bytes(b)


def card(root, i, bus, table):
    dev = root / "sys" / "class" / "drm" / f"card{i}" / "device"
    (dev / "power").mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "device").write_text("0x73bf\n")
    (dev / "uevent").write_text(f"DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME={bus}\n")
    (dev / "power" / "runtime_status").write_text("active\n")
    (dev / "gpu_busy_percent").write_text("37\n")
    if table is not None:
        (dev / "gpu_metrics").write_bytes(table)


@pytest.fixture
def amd(tmp_path):
    # A Navi board's 1.3 table (average_gfx_activity at 16, average_umc_activity at 18, %), a
    # table of a revision gpustream does not know (1.9), and an APU's 2.4 table (1/100 %).
    card(tmp_path, 0, "0000:03:00.0", gpu_metrics(1, 3, 120, {16: 97, 18: 41}))
    card(tmp_path, 1, "0000:04:00.0", gpu_metrics(1, 9, 400, {}))
    card(tmp_path, 2, "0000:c4:00.0", gpu_metrics(2, 4, 168, {28: 4275}))
    (tmp_path / "proc").mkdir()
    (tmp_path / "dev" / "dri").mkdir(parents=True)
    config = {"amd": {"source": "sysfs"}, "sysfs_root": str(tmp_path / "sys"),
              "procfs_root": str(tmp_path / "proc"), "devfs_root": str(tmp_path / "dev")}
    with gpustream.Telemetry(probes=["amd"], interval=0.05, config=config) as t:
        assert t.wait_for_first_samples(10), "the AMD probe published nothing"
        wait_for(t, lambda: len(t.latest("amd")[0].devices) == 3, "three AMD cards")
        yield t


def test_amd_gpu_metrics_activity(amd):
    devs = {d.pci_bus_id: d for d in amd.latest("amd")[0].devices}
    navi = devs["0000:03:00.0"]
    assert navi["graphics_activity_percent"] == 97.0
    assert navi["dram_activity_percent"] == 41.0
    assert navi.reading("graphics_activity_percent").source == "sysfs"
    assert navi.absent["sm_activity_percent"] == "unsupported"
    # An unknown revision: both absent, never a value read from an unknown layout.
    unknown = devs["0000:04:00.0"]
    assert unknown.absent["graphics_activity_percent"] == "unsupported"
    assert unknown.absent["dram_activity_percent"] == "unsupported"
    apu = devs["0000:c4:00.0"]
    assert apu["graphics_activity_percent"] == pytest.approx(42.75)
    assert apu.absent["dram_activity_percent"] == "unsupported"
