"""ncu's CSV read as untrusted text: both layouts, units, digit grouping, the caps, and the
split of one report into per-call signatures (synthetic reports in ncu's documented shape;
``test_profile_real.py`` reads the ones captured on the H200)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxharness.profile import metrics as m
from sandboxharness.profile.evidence import regime_signatures, signatures, split_calls, summarize
from sandboxharness.profile.ncu_parse import KernelRow, NcuParseError, number, parse

FIXED = ['ID', 'Process ID', 'Process Name', 'Host Name', 'Kernel Name', 'Context', 'Stream',
         'Block Size', 'Grid Size', 'Device', 'CC']


def q(*fields: str) -> str:
    return ",".join(f'"{f}"' for f in fields)


def raw(rows: list[tuple[str, dict[str, str]]], units: dict[str, str]) -> str:
    names = list(units)
    lines = ["==PROF== Connected to process 9 (/usr/bin/python3)",
             q(*FIXED, *names), q(*[""] * len(FIXED), *units.values())]
    for i, (kernel, vals) in enumerate(rows):
        lines.append(q(str(i), "9", "python3", "h", kernel, "1", "7", "(128, 1, 1)",
                       "(8, 1, 1)", "0", "9.0", *(vals.get(n, "") for n in names)))
    return "\n".join(lines) + "\n"


UNITS = {m.DURATION: "nsecond", m.SM_PCT: "%", m.MEM_PCT: "%", m.DRAM_READ: "byte",
         m.DRAM_WRITE: "byte", m.THEORETICAL_OCC: "%", **{v: "block" for v in m.OCC_LIMITS.values()}}


def test_raw_layout_in_base_units() -> None:
    text = raw([("spin_kernel", {m.DURATION: "1,024"}),
                ("rms", {m.DURATION: "412,160", m.SM_PCT: "21.3", m.MEM_PCT: "88.4",
                         m.DRAM_READ: "134,217,728", m.DRAM_WRITE: "n/a"})], UNITS)
    rep = parse(text)
    assert rep.layout == "raw" and [r.name for r in rep.rows] == ["spin_kernel", "rms"]
    k = rep.rows[1].metrics
    assert k[m.DURATION] == 412160.0 and k[m.MEM_PCT] == 88.4
    assert k[m.DRAM_READ] == 134217728.0 and m.DRAM_WRITE not in k


def test_details_layout_groups_rows_by_kernel_and_scales_units() -> None:
    head = q(*FIXED, "Section Name", "Metric Name", "Metric Unit", "Metric Value")

    def row(i: int, kernel: str, metric: str, unit: str, value: str) -> str:
        return q(str(i), "9", "py", "h", kernel, "1", "7", "(1,1,1)", "(1,1,1)", "0", "9.0",
                 "Command line profiler metrics", metric, unit, value)

    text = "\n".join([head, row(0, "gemm", m.DURATION, "msecond", "1.50"),
                      row(0, "gemm", m.DRAM_READ, "Mbyte", "2,000.00"),
                      row(1, "tail", m.DURATION, "usecond", "3")])
    rep = parse(text)
    assert rep.layout == "details"
    assert rep.rows[0].metrics == {m.DURATION: 1.5e6, m.DRAM_READ: 2e9}
    assert rep.rows[1].metrics == {m.DURATION: 3000.0}


def test_error_lines_are_kept_and_a_report_of_only_errors_is_empty() -> None:
    rep = parse("==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    assert rep.rows == [] and rep.errors == ["==ERROR== ERR_NVGPUCTRPERM - no permission"]


@pytest.mark.parametrize(("text", "why"), [
    ("just some text\n", "no CSV header"),
    (q(*FIXED, m.DURATION) + "\n" + q("x", *[""] * 10, "1") + "\n", "not an integer"),
    (q(*FIXED, m.DURATION) + "\n" + q("0", *[""] * 10) + "\n", "fields"),
    (q(*FIXED, "ID") + "\n", "twice"),
])
def test_malformed_reports_are_one_line_errors(text: str, why: str) -> None:
    with pytest.raises(NcuParseError, match=why):
        parse(text)


def test_a_kernel_id_twice_and_a_second_header_are_refused() -> None:
    one = raw([("a", {m.DURATION: "1"})], {m.DURATION: "nsecond"})
    with pytest.raises(NcuParseError, match="second CSV header"):
        parse(one + one)
    lines = one.splitlines()
    with pytest.raises(NcuParseError, match="appears twice"):
        parse("\n".join([*lines, lines[-1]]))


def test_caps_bytes_lines_and_line_length() -> None:
    with pytest.raises(NcuParseError, match="more than 100 bytes"):
        parse("x" * 101, max_bytes=100)
    with pytest.raises(NcuParseError, match="characters long"):
        parse("a" * (70 * 1024))
    with pytest.raises(NcuParseError, match="lines"):
        parse("\n" * 60_000)


@pytest.mark.parametrize(("text", "want"), [
    ("1,234.5", 1234.5), ("12", 12.0), ("-3.5", -3.5), ("n/a", None), ("", None),
    ("inf", None), ("nan", None), ("abc", None)])
def test_number(text: str, want: float | None) -> None:
    assert number(text) == want


@pytest.mark.parametrize("text", ["1.234.567,5", "12,34", ",123", "1,2345"])
def test_unknown_digit_grouping_is_refused_not_guessed(text: str) -> None:
    with pytest.raises(NcuParseError, match="grouping"):
        number(text)


def test_control_characters_in_kernel_names_are_neutralised() -> None:
    rep = parse(raw([("evil\x1b[2J\x07name" + "x" * 900, {m.DURATION: "5"})],
                    {m.DURATION: "nsecond"}))
    name = rep.rows[0].name
    assert name.isprintable() and name.startswith("evil?[2J?name") and len(name) == 512


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600))
def test_any_text_parses_or_is_refused_cleanly(text: str) -> None:
    try:
        rep = parse(text)
    except NcuParseError:
        return
    for r in rep.rows:
        assert r.name.isprintable()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.text(alphabet='0123456789,.n/a"x', max_size=12), min_size=12,
                         max_size=12), max_size=6))
def test_any_rows_under_a_real_header_parse_or_are_refused(rows: list[list[str]]) -> None:
    text = "\n".join([q(*FIXED, m.DURATION), *(",".join(r) for r in rows)])
    try:
        parse(text)
    except NcuParseError:
        pass


# -- from rows to signatures ------------------------------------------------------------------
def k(i: int, name: str, us: float, **extra: float) -> KernelRow:
    return KernelRow(i, name, {m.DURATION: us * 1e3, **extra})


def test_calls_are_split_at_markers_and_a_missing_call_is_empty() -> None:
    rows = [k(0, "spin_kernel", 1), k(1, "a", 5), k(2, "b", 6), k(3, "spin_kernel", 1),
            k(4, "c", 7)]
    assert [[r.name for r in s] for s in split_calls(rows, 3)] == [["a", "b"], ["c"], []]
    assert split_calls([k(0, "a", 1)], 1) == [[k(0, "a", 1)]]
    with pytest.raises(NcuParseError, match="no call marker"):
        split_calls([k(0, "a", 1)], 2)
    with pytest.raises(NcuParseError, match="3 call markers"):
        split_calls([k(i, "spin_kernel", 1) for i in range(3)], 2)


def test_dominant_kernel_is_the_most_time_and_its_slowest_launch() -> None:
    rows = [k(0, "small", 30), k(1, "big", 20, **{m.SM_PCT: 10.0}),
            k(2, "big", 25, **{m.SM_PCT: 90.0}), k(3, "tail", 1)]
    got = summarize(rows)
    assert got is not None
    assert got.kernel == "big" and got.duration_us == 25 and got.sm_throughput_pct == 90.0
    assert got.kernel_count == 4 and got.total_duration_us == 76


def test_occupancy_limiter_and_dram_bytes() -> None:
    lim = m.OCC_LIMITS
    row = k(0, "a", 50, **{m.THEORETICAL_OCC: 50.0, lim["registers"]: 2, lim["shared_mem"]: 4,
                           lim["warps"]: 8, lim["blocks"]: 32, m.DRAM_READ: 100.0,
                           m.DRAM_WRITE: 28.0})
    got = summarize([row])
    assert got is not None and got.occupancy_limiter == "registers" and got.dram_bytes == 128
    full = k(0, "a", 50, **{m.THEORETICAL_OCC: 100.0, lim["registers"]: 2})
    assert summarize([full]).occupancy_limiter is None  # type: ignore[union-attr]


def test_signatures_per_call_and_back_from_details() -> None:
    rows = [k(0, "spin_kernel", 1), k(1, "rms", 400, **{m.MEM_PCT: 88.0, m.SM_PCT: 20.0}),
            k(2, "spin_kernel", 1), k(3, "rms", 2)]
    sigs = signatures(rows, 3)
    assert [s and (s.bottleneck, s.limiter) for s in sigs] == [
        ("memory", "dram_bandwidth"), ("launch", "short_kernel"), None]
    details = {"signatures": [{"regime": f"b={i}", "signature": s and s.model_dump(mode="json")}
                           for i, s in enumerate(sigs)]}
    assert regime_signatures(details) == {"b=0": sigs[0], "b=1": sigs[1], "b=2": None}
    assert regime_signatures({}) == {}


def test_a_metric_out_of_range_is_a_parse_error_naming_it() -> None:
    with pytest.raises(NcuParseError, match="sm_throughput_pct"):
        summarize([k(0, "a", 5, **{m.SM_PCT: 1e9})])


def test_the_command_line_is_the_one_the_parser_expects() -> None:
    opts = m.ncu_options(launch_count=34, log_file="../out/ncu.csv")
    assert opts[:5] == ["--csv", "--page", "raw", "--print-units", "base"]
    assert opts[opts.index("--metrics") + 1].split(",") == list(m.METRICS)
    assert opts[opts.index("--profile-from-start") + 1] == "off"
    assert opts[opts.index("--clock-control") + 1] == "none"
    assert opts[-4:] == ["--launch-count", "34", "--log-file", "../out/ncu.csv"]
