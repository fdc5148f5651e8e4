"""benchmarks/suite_times.py: per-file seconds of a junit report, summed over the file's tests (a test
class counted with its module), slowest first, with the total over every file; and the slowest tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.b2tjax.test_fast" name="test_a" time="1.5"/>
<testcase classname="tests.b2tjax.test_fast" name="test_b[x]" time="2.0"/>
<testcase classname="tests.launch.test_slow" name="test_c" time="30.25"/>
<testcase classname="tests.launch.test_slow.TestGroup" name="test_d" time="9.75"/>
<testcase classname="tests.models.test_tiny" name="test_e" time="0.5"><skipped message="no"/></testcase>
</testsuite></testsuites>
"""


def test_the_table_sums_seconds_per_file_slowest_first(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("suite_times", ROOT / "benchmarks" / "suite_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    assert module.main([str(report), "--top", "2"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2:] == [
        "| tests/launch/test_slow.py | 2 | 40 | 90.9% |",
        "| tests/b2tjax/test_fast.py | 2 | 4 | 8.0% |",
        "| total (3 files) | 5 | 44 | 100% |",
    ]
    assert module.main([str(report), "--top", "1", "--tests", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "| tests/launch/test_slow.py::test_c | 30.2 |",
        "| tests/launch/test_slow.py::test_d | 9.8 |",
    ]
    assert module.main([str(tmp_path / "missing.xml")]) == 2


def test_an_earlier_report_adds_its_seconds_and_the_ratio(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("suite_times", ROOT / "benchmarks" / "suite_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    now, before = tmp_path / "now.xml", tmp_path / "before.xml"
    now.write_text(REPORT)
    before.write_text(REPORT.replace('time="30.25"', 'time="70.25"').replace("test_fast", "test_gone"))
    assert module.main([str(now), "--top", "2", "--before", str(before)]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [
        "| tests/launch/test_slow.py | 2 | 40 | 90.9% | 80 | 0.50 |",  # 70.25 + 9.75 before
        "| tests/b2tjax/test_fast.py | 2 | 4 | 8.0% | - | - |",  # not in the earlier report
        "| total (3 files) | 5 | 44 | 100% | 84 | 0.52 |",
    ]
