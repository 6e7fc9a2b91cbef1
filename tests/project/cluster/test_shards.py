"""Sharded grading end to end: `grader batch --shard K/N|auto` on a small class, `grader merge`, and what
merge refuses. The shards and the single-machine run are real `grader` processes on the same seed.

Only the softmax exercise is graded (``--exercise``) and the class has 7 submissions, to keep it short.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import schema
from grader.cli.main import main
from grader.cluster import shard
from grader.cluster.mergecheck import card_name
from grader.errors import UsageError
from grader.intake import classfolder as discover
from tests.project.support.common import CORPUS, ROOT

pytestmark = pytest.mark.cost(19)  # seconds on 2 cores: started early (tests/project/conftest.py)

FAST = ["--exercise", "softmax", "--per-test-time-limit", "8", "--seed", "5", "--quiet"]
CORRECT = ("alice", "bob", "carol")
BUGGY = ("stable_without_max", "naive_sums_dim0", "naive_sum_detached")
KEYS = {*CORRECT, *BUGGY, "broken"}
TIMING = {
    "generated",
    "wall_s",
    "submissions_per_minute",
    "slots",
    "slowest",
    "timing",
    "last_graded_run",
}
SHARD_VARS = (
    "GRADER_SHARD",
    "GRADER_SHARDS",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
)


def _make_class(root: Path) -> Path:
    for name in CORRECT:
        (root / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / "softmax.py", root / name / "softmax.py")
    for name in BUGGY:
        (root / name).mkdir()
        shutil.copy(CORPUS / "buggy" / "softmax" / f"{name}.py", root / name / "softmax.py")
    (root / "broken.zip").write_bytes(
        b"PK\x03\x04 truncated"
    )  # an intake error must merge like a grade
    return root


def _grader(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SHARD_VARS}
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean, **(env or {})},
        timeout=600,
    )


def _cards(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "scorecards").glob("*.json"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One single-machine run (-j 2) and two shards (-j 1 each: Slurm's and Kubernetes' variables), merged."""
    base = tmp_path_factory.mktemp("shards")
    klass = _make_class(base / "class")
    single = _grader("batch", str(klass), "--out", str(base / "single"), "-j", "2", *FAST)
    assert single.returncode == 1, single.stderr  # "broken" is an intake error
    slurm = {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "1"}
    one = _grader(
        "batch",
        str(klass),
        "--out",
        str(base / "s1"),
        "-j",
        "1",
        "--shard",
        "auto",
        *FAST,
        env=slurm,
    )
    two = _grader(
        "batch",
        str(klass),
        "--out",
        str(base / "s2"),
        "-j",
        "1",
        "--shard",
        "auto",
        "--shards",
        "2",
        *FAST,
        env={"JOB_COMPLETION_INDEX": "1"},
    )
    assert one.returncode in (0, 1) and two.returncode in (0, 1), one.stderr + two.stderr
    merged = _grader(
        "merge",
        str(base / "s1"),
        str(base / "s2"),
        "--out",
        str(base / "merged"),
        "--export",
        "csv",
    )
    return base, klass, merged


def test_shards_partition_the_class(tmp_path):
    entries = discover.discover(_make_class(tmp_path / "class")).entries
    assert {e.key for e in entries} == KEYS
    for count in range(1, 5):
        parts = [shard.Shard(k, count).select(entries) for k in range(1, count + 1)]
        keys = [e.key for part in parts for e in part]
        assert sorted(keys) == sorted(KEYS)  # every student in exactly one shard
    many = [f"student{i:04d}" for i in range(400)]
    sizes = [sum(shard.shard_of(k, 4) == n for k in many) for n in range(1, 5)]
    assert sum(sizes) == 400 and min(sizes) > 60  # a hash, not a range: the parts are near equal
    assert [shard.shard_of(k, 2) for k in ("alice", "bob", "carol")] == [
        2,
        1,
        1,
    ]  # sha256: stable forever


def test_each_shard_writes_its_scorecards_and_a_valid_manifest(runs):
    base, _, _ = runs
    docs = [json.loads((base / f"s{k}" / f"shard-{k}-of-2.json").read_text()) for k in (1, 2)]
    for k, doc in enumerate(docs, 1):
        schema.validate("shard", doc)
        assert (doc["shard"]["index"], doc["shard"]["count"], doc["seed"]) == (k, 2, 5)
        assert doc["assignment"] == "attention-basics" and doc["exercises"] == ["softmax"]
        assert doc["state"] == "finished" and doc["canary"]["record"]["solutions"] == 6
        assert doc["class"]["submissions"] == 7
        assert {f"{s['key']}.json" for s in doc["students"]} == {
            p.name for p in (base / f"s{k}" / "scorecards").iterdir()
        }
        assert not (base / f"s{k}" / "gradebook.csv").exists()  # merge writes it, once
    assert docs[0]["shard"]["source"] == "SLURM_ARRAY_TASK_ID=0"
    assert docs[1]["shard"]["source"] == "JOB_COMPLETION_INDEX=1"
    one, two = ({s["key"] for s in d["students"]} for d in docs)
    assert one | two == KEYS and not one & two
    assert docs[0]["fingerprint"] == docs[1]["fingerprint"]


def test_merged_result_equals_the_single_machine_run(runs):
    base, _, merged = runs
    assert merged.returncode == 1, (
        merged.stderr
    )  # as the single run: one intake error, and it says so
    assert "intake error" in merged.stderr
    single, out = base / "single", base / "merged"
    assert (out / "gradebook.csv").read_text() == (single / "gradebook.csv").read_text()
    assert (out / "exports" / "csv" / "gradebook.csv").read_text() == (
        single / "gradebook.csv"
    ).read_text()
    a, b = _cards(single), _cards(out)
    assert set(a) == set(b) == KEYS
    for key in KEYS:
        assert (b[key]["status"], b[key]["score"], b[key]["seed"]) == (
            a[key]["status"],
            a[key]["score"],
            a[key]["seed"],
        )
        outcomes = [[(t["id"], t["outcome"]) for t in ex["tests"]] for ex in a[key]["exercises"]]
        assert [
            [(t["id"], t["outcome"]) for t in ex["tests"]] for ex in b[key]["exercises"]
        ] == outcomes
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (single, out))
    schema.validate("summary", s2)
    (
        s1["canary"].pop("cached"),
        s2["canary"].pop("cached"),
    )  # the single run may have proved it first
    assert {k: v for k, v in s2.items() if k not in TIMING} == {
        k: v for k, v in s1.items() if k not in TIMING
    }
    assert (
        s2["counts"]["submissions"] == 7
        and s2["slots"] == 2
        and s2["timing"]["warm_workers_used"] == 6
    )
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert {
        k for k, r in rows.items() if r["status"] == "graded" and float(r["total"]) == 6
    } == set(CORRECT)
    assert (out / "report.html").stat().st_size > 1000


def _copy(runs, tmp_path: Path, *names: str) -> list[Path]:
    base = runs[0]
    return [
        Path(shutil.copytree(base / n.split(":")[0], tmp_path / n.replace(":", "_"))) for n in names
    ]


def test_merge_reads_one_folder_holding_every_shard(runs, tmp_path):
    base = runs[0]
    holder = tmp_path / "all"
    shutil.copytree(base / "s1", holder / "a"), shutil.copytree(base / "s2", holder / "b")
    shared = tmp_path / "shared"  # shards that wrote into one --out on a shared file system
    shutil.copytree(base / "s1", shared), shutil.copytree(base / "s2", shared, dirs_exist_ok=True)
    for folder, out in ((holder, tmp_path / "o1"), (shared, shared)):
        assert main(["merge", str(folder), "--out", str(out)]) == 1
        assert (out / "gradebook.csv").read_text() == (
            base / "single" / "gradebook.csv"
        ).read_text()


def _refused(capsys, *args: str) -> str:
    assert main(["merge", *args]) == 2
    return capsys.readouterr().err


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("assignment", lambda d: d.update(assignment="another-assignment")),
        ("grader version", lambda d: d["grader"].update(version="0.0.9")),
        ("canary", lambda d: d["canary"].update(required=False, record=None)),
        ("canary", lambda d: d["canary"]["record"].update(solutions=5.0)),
        ("grading inputs", lambda d: d.update(fingerprint="0" * 64)),
        ("exercises", lambda d: d.update(exercises=["softmax", "masks"])),
    ],
)
def test_merge_refuses_shards_that_do_not_belong_together(runs, tmp_path, capsys, what, change):
    s1, s2 = _copy(runs, tmp_path, "s1", "s2")
    _edit(s2 / "shard-2-of-2.json", change)
    err = _refused(capsys, str(s1), str(s2), "--out", str(tmp_path / "out"))
    assert (
        f"mixed {what}:" in err
        and "shard 1/2" in err
        and "shard 2/2" in err
        and "Traceback" not in err
    )
    assert not (tmp_path / "out").exists()  # nothing written


def test_merge_names_a_missing_shard_a_missing_student_and_a_duplicate(runs, tmp_path, capsys):
    s1, s2, again = _copy(runs, tmp_path, "s1", "s2", "s1:again")
    err = _refused(capsys, str(s1), "--out", str(tmp_path / "out"))
    assert "shard 2 of 2 is missing" in err and "--shard 2/2" in err
    doc = json.loads((s1 / "shard-1-of-2.json").read_text())
    victim = doc["students"][0]["key"]
    (s1 / "scorecards" / f"{victim}.json").unlink()
    err = _refused(capsys, str(s1), str(s2), "--out", str(tmp_path / "out"))
    assert f"1 student(s) without a scorecard: {victim} (shard 1/2" in err
    assert (
        main(["merge", str(again), str(s2), str(again), "--out", str(tmp_path / "ok")]) == 1
    )  # one folder twice: one shard
    err = _refused(capsys, str(again), str(s1), str(s2), "--out", str(tmp_path / "out"))
    dups = {s["key"] for s in doc["students"]}
    assert f"{len(dups)} student(s) graded by more than one shard (" in err and all(
        k in err for k in dups
    )
    _edit(s2 / "shard-2-of-2.json", lambda d: d.update(state="started", finished=None, run=None))
    err = _refused(capsys, str(again), str(s2), "--out", str(tmp_path / "out"))
    assert "shard 2/2" in err and "did not finish" in err
    assert not (tmp_path / "out").exists()


def _card_of(folders: list[Path], key: str) -> Path:
    for folder in folders:
        doc = json.loads(next(folder.glob("shard-*-of-*.json")).read_text())
        for student in doc["students"]:
            if student["key"] == key:
                return folder / card_name(student)
    raise AssertionError(f"no shard lists {key}")


def test_merge_refuses_an_error_card_without_its_error_and_reads_a_version_2_one(
    runs, tmp_path, capsys
):
    """Scorecard schema 3 ties ``error`` to ``status``: a hand-edited error card with ``error: null`` is
    named (file, student, shard) with what to do, before the summary would fail on it; schema 2 still merges."""
    base = runs[0]
    s1, s2 = _copy(runs, tmp_path, "s1", "s2")
    broken = _card_of([s1, s2], "broken")  # an intake error card
    _edit(broken, lambda d: d.update(error=None))
    err = _refused(capsys, str(s1), str(s2), "--out", str(tmp_path / "out"))
    assert "1 scorecard(s) unusable (rerun their shard's command" in err
    assert f"{broken} (broken, shard " in err and "at error: None is not of type 'object'" in err
    assert "status error names its error" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    _edit(broken, lambda d: d.update(error={"kind": "intake", "message": "x"}, schema_version=2))
    assert main(["merge", str(s1), str(s2), "--out", str(tmp_path / "old")]) == 1
    assert (tmp_path / "old" / "gradebook.csv").read_text() == (
        base / "single" / "gradebook.csv"
    ).read_text()


@pytest.mark.parametrize(
    ("env", "shards", "want"),
    [
        ({"GRADER_SHARD": "2/3"}, None, (2, 3, "GRADER_SHARD")),
        (
            {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"},
            None,
            (3, 3, "SLURM_ARRAY_TASK_ID=2"),
        ),
        (
            {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "3"},
            None,
            (2, 3, "SLURM_ARRAY_TASK_ID=2"),
        ),
        (
            {
                "SLURM_ARRAY_TASK_ID": "5",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_MAX": "5",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            None,
            (3, 3, "SLURM_ARRAY_TASK_ID=5"),
        ),
        ({"JOB_COMPLETION_INDEX": "1"}, 3, (2, 3, "JOB_COMPLETION_INDEX=1")),
        (
            {"JOB_COMPLETION_INDEX": "1", "GRADER_SHARDS": "3"},
            None,
            (2, 3, "JOB_COMPLETION_INDEX=1"),
        ),
        (
            {"GRADER_SHARD": "1/3", "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"},
            None,
            (1, 3, "GRADER_SHARD"),
        ),
    ],
)
def test_shard_auto_reads_each_scheduler(env, shards, want):
    got = shard.resolve("auto", shards=shards, env=env)
    assert (got.index, got.count, got.source) == want


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({}, [], "none of GRADER_SHARD, SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX is set"),
        ({"JOB_COMPLETION_INDEX": "0"}, [], "give --shards N or set GRADER_SHARDS"),
        ({"JOB_COMPLETION_INDEX": "3"}, ["--shards", "3"], "between 1 and N=3"),
        (
            {"SLURM_ARRAY_TASK_ID": "1"},
            [],
            "neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX",
        ),
        (
            {
                "SLURM_ARRAY_TASK_ID": "1",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "9",
                "SLURM_ARRAY_TASK_COUNT": "3",
            },
            [],
            "has gaps",
        ),
        ({"GRADER_SHARD": "x"}, [], "give K/N"),
        ({"GRADER_SHARD": "1/2"}, ["--shards", "3"], "--shards 3 disagrees with shard 1/2"),
    ],
)
def test_shard_auto_fails_clearly(monkeypatch, capsys, tmp_path, env, args, message):
    for name in SHARD_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    klass = _make_class(tmp_path / "class")
    assert (
        main(["batch", str(klass), "--out", str(tmp_path / "out"), "--shard", "auto", *args, *FAST])
        == 2
    )
    err = capsys.readouterr().err
    assert message in err and err.startswith("grader: error: ") and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"GRADER_SHARD": "2/3"}, "GRADER_SHARD"),
        (
            {
                "SLURM_ARRAY_TASK_ID": "1",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_COUNT": "3",
            },
            "SLURM_ARRAY_TASK_ID=1",
        ),
        ({"JOB_COMPLETION_INDEX": "1", "GRADER_SHARDS": "3"}, "JOB_COMPLETION_INDEX=1"),
    ],
)
def test_batch_shard_auto_writes_the_shard_it_read(monkeypatch, tmp_path, env, want):
    """Shard 2 of 3 of this class is empty (the hash puts nobody there): the command runs whole, and fast."""
    for name in SHARD_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    klass = _make_class(tmp_path / "class")
    assert not shard.Shard(2, 3).select(discover.discover(klass).entries)
    assert (
        main(["batch", str(klass), "--out", str(tmp_path / "out"), "--shard", "auto", *FAST]) == 0
    )
    doc = json.loads((tmp_path / "out" / "shard-2-of-3.json").read_text())
    schema.validate("shard", doc)
    assert (doc["shard"]["index"], doc["shard"]["count"], doc["shard"]["source"]) == (2, 3, want)
    assert doc["students"] == [] and doc["state"] == "finished" and doc["class"]["submissions"] == 7


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3/2", "shard K=3 must be between 1 and N=2"),
        ("0/0", "the number of shards N must be at least 1"),
        ("x", "give K/N"),
        ("0/4", "shards are numbered from 1"),
        ("1/2/3", "give K/N"),
        ("-1/2", "between 1 and N=2"),
    ],
)
def test_bad_shard_values_are_usage_errors(capsys, tmp_path, value, message):
    klass = _make_class(tmp_path / "class")
    assert (
        main(["batch", str(klass), "--out", str(tmp_path / "out"), f"--shard={value}", *FAST]) == 2
    )
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    with pytest.raises(UsageError, match=re.escape(message)):
        shard.parse(value)


def test_bad_shard_options_from_a_real_process(tmp_path):
    klass = _make_class(tmp_path / "class")
    done = _grader("batch", str(klass), "--out", str(tmp_path / "out"), "--shard", "3/2", *FAST)
    assert (
        done.returncode == 2
        and "shard K=3 must be between 1 and N=2" in done.stderr
        and "Traceback" not in done.stderr
    )
    done = _grader("batch", str(klass), "--out", str(tmp_path / "out"), "--shards", "2", *FAST)
    assert done.returncode == 2 and "give --shard auto" in done.stderr
    done = _grader(
        "batch",
        str(klass),
        "--out",
        str(tmp_path / "out"),
        "--shard",
        "1/2",
        "--export",
        "csv",
        *FAST,
    )
    assert done.returncode == 2 and "give them to grader merge" in done.stderr
    done = _grader("merge", str(tmp_path / "class"), "--out", str(tmp_path / "out"))
    assert (
        done.returncode == 2
        and "no shard manifest" in done.stderr
        and "Traceback" not in done.stderr
    )


def test_cluster_recipes_run_shard_auto_then_merge():
    import yaml

    cluster = ROOT / "examples" / "cluster"
    for name in ("slurm-grade.sbatch", "slurm-merge.sbatch"):
        assert (
            subprocess.run(["bash", "-n", str(cluster / name)], capture_output=True).returncode == 0
        )
    slurm = (cluster / "slurm-grade.sbatch").read_text()
    assert "#SBATCH --array=0-" in slurm and "batch" in slurm and "--shard auto" in slurm
    assert "merge" in (cluster / "slurm-merge.sbatch").read_text()
    job = yaml.safe_load((cluster / "k8s-indexed-job.yaml").read_text())
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert job["spec"]["completionMode"] == "Indexed" and env["GRADER_SHARDS"] == str(
        job["spec"]["completions"]
    )
    assert "grader batch" in container["args"][0] and "--shard auto" in container["args"][0]
    merge_job = yaml.safe_load((cluster / "k8s-merge-job.yaml").read_text())
    assert "grader merge" in merge_job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    flow = yaml.safe_load((cluster / "github-actions.yml").read_text())
    grade = flow["jobs"]["grade"]
    shards = grade["strategy"]["matrix"]["shard"]
    assert grade["env"][
        "GRADER_SHARD"
    ] == f"${{{{ matrix.shard }}}}/{len(shards)}" and shards == list(range(1, len(shards) + 1))
    steps = " ".join(str(s.get("run", "")) for s in grade["steps"])
    assert "grader batch" in steps and "--shard auto" in steps
    assert flow["jobs"]["merge"]["needs"] == "grade"
    assert "grader merge" in " ".join(str(s.get("run", "")) for s in flow["jobs"]["merge"]["steps"])


def test_merge_with_similarity_compares_the_merged_class(runs, tmp_path, capsys):
    base, klass, _ = runs
    out = tmp_path / "merged"
    assert (
        main(
            [
                "merge",
                str(base / "s1"),
                str(base / "s2"),
                "--out",
                str(out),
                "--similarity",
                "--class",
                str(klass),
            ]
        )
        == 1
    )  # "broken" is an intake error
    doc = json.loads((out / "summary.json").read_text())
    schema.validate("summary", doc)
    # alice, bob and carol hand in the reference's softmax verbatim, whichever shard graded them: the merged
    # class lists them as byte-identical submissions, a note of its own. Not as a similarity pair: in a class of 7
    # those two lines are the course's idiom (what independent honest authors write alike), no evidence of copying.
    assert {"students": list(CORRECT)} in [
        {"students": g["students"]} for g in doc["identical_submissions"]
    ]
    found = {(p["a"], p["b"]) for p in doc["similarity"]["pairs"] if p["exercise"] == "softmax"}
    assert not found & {("alice", "bob"), ("alice", "carol"), ("bob", "carol")}
    assert doc["similarity"]["unread"] == ["broken"]  # the whole class was read, not one shard's
    assert "never an automatic penalty" in (out / "report.html").read_text()
    assert main(["merge", str(base / "s1"), "--out", str(tmp_path / "x"), "--similarity"]) == 2
    assert "--class" in capsys.readouterr().err
