"""Wrong uses of gpustream that mypy --strict must refuse against the stubs (test_typing.py):
each line marked `# error` is one error, so stubs that accept anything (Any) fail the test."""
import gpustream

t = gpustream.Telemetry(interval="fast")  # error
t.fits("1G")  # error
t.stream(timeout="5")  # error
value: str = t.latest()[0].devices[0].metrics["power_watts"]  # error
fit: gpustream.DeviceFit = t.best_device(1)  # error
t.subscribe(lambda a, b: None)  # error
