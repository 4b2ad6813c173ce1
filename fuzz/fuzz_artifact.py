#!/usr/bin/env python
"""Structure-aware mutation fuzzer of ipexconvert's artifact reader and executor (see fuzz/README.md).

    python fuzz/fuzz_artifact.py --seconds 60 [--seed N] [--out fuzz/findings] [--jobs 1]

Each case takes a valid tiny artifact (or an earlier mutant that still ran), applies 1-4 mutations
from mutators.MUTATORS, usually re-hashes it with ipexconvert's own hash functions, and runs it in a
forked child with a time and memory cap (harness.py). Crashes, hangs, out-of-memory, exceptions that
are not ipexconvert errors, and code execution are findings: saved de-duplicated under --out with the
artifact, the mutation chain and a repro.py. Exit status: 0 no findings, 1 findings, 2 setup failed.
"""
from __future__ import annotations

import os
import sys

# Forked children must not inherit an OpenMP thread pool (GNU OpenMP deadlocks in a child forked after a
# parallel region), so the fuzzing process runs every kernel single-threaded. This must happen before
# torch is imported.
_USER_ENV = dict(os.environ)
if "torch" in sys.modules and os.environ.get("OMP_NUM_THREADS") != "1":
    print("fuzz_artifact: torch was imported before OMP_NUM_THREADS=1 could be set; run this file as a script",
          file=sys.stderr)
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import fnmatch  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MAX_TENSOR_BYTES_DEFAULT = 256 << 20  # the project's own per-op budget, lowered below the memory cap


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from seeds import SEEDS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz (not counting seed creation)")
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many cases (deterministic runs)")
    p.add_argument("--seed", type=int, default=0, help="master seed: cases are a function of it and their index")
    p.add_argument("--out", type=Path, default=HERE / "findings", help="where findings are saved")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (each fuzzes its share of case indices)")
    p.add_argument("--seeds-dir", type=Path, default=HERE / ".seeds", help="cache of the seed artifacts")
    p.add_argument("--seeds", default=",".join(SEEDS), help=f"comma-separated subset of: {', '.join(SEEDS)}")
    p.add_argument("--mutators", default="*", help="comma-separated names or globs (default: all); --list-mutators")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per case before it counts as a hang")
    p.add_argument("--mem-mb", type=int, default=4096, help="address space a case may add before it counts as OOM")
    p.add_argument("--max-tensor-bytes", type=int, default=MAX_TENSOR_BYTES_DEFAULT,
                   help="IPEXCONVERT_MAX_TENSOR_BYTES for the cases (keep it below --mem-mb)")
    p.add_argument("--rehash-ratio", type=float, default=0.85, help="share of fresh cases written with valid hashes")
    p.add_argument("--no-minimize", action="store_true", help="keep findings' full mutation chains")
    p.add_argument("--summary-json", type=Path, default=None, help="also write the summary here")
    p.add_argument("--replay", type=Path, default=None,
                   help="run one artifact (or a finding folder) through the harness, print the result, and exit")
    p.add_argument("--list-mutators", action="store_true")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)  # index of a --jobs worker
    args = p.parse_args(argv)
    unknown = [s for s in args.seeds.split(",") if s not in SEEDS]
    if unknown:
        p.error(f"unknown seed(s) {', '.join(unknown)}")
    return args


# ---- state of one fuzzing process ---------------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, args: argparse.Namespace, seed_paths: dict[str, Path]):
        import harness
        import mutators
        from parts import Parts

        self.args = args
        self.limits = harness.Limits(timeout=args.timeout, mem_bytes=args.mem_mb << 20)
        self.seeds = {name: Parts.read(path.read_bytes()) for name, path in sorted(seed_paths.items())}
        self.seed_paths = seed_paths
        self.inputs = {name: parts.example_inputs() for name, parts in self.seeds.items()}
        mutators.set_library([p.graph for p in self.seeds.values()])
        patterns = args.mutators.split(",")
        self.names = [n for n in mutators.RANDOM_MUTATORS if any(fnmatch.fnmatch(n, pat) for pat in patterns)]
        if not self.names:
            raise SystemExit(f"no mutator matches {args.mutators!r} (see --list-mutators)")
        self.weights = [max(mutators.WEIGHTS[n], 0.05) for n in self.names]
        self.tmp = Path(tempfile.mkdtemp(prefix="ipxfuzz-run-"))
        self.corpus: list[dict] = []
        self.findings: dict[tuple, dict] = {}  # key -> record (first case, count, folder)
        self.stats: dict[str, Any] = {"cases": 0, "outcomes": Counter(), "mutators": {}, "stopped_at": Counter(),
                                      "mutator_errors": Counter(), "integrity": Counter(), "stage_outcomes": {},
                                      "stage_seconds": Counter(), "case_seconds": 0.0}

    # ---- making cases -----------------------------------------------------------------------------------------------
    def replay(self, spec: dict):
        """The parts of a case: its seed with its steps applied (each step's randomness is its own)."""
        import mutators
        parts = self.seeds[spec["seed"]].copy()
        parts.rehash = spec["rehash"]
        for name, step_seed in spec["steps"]:
            try:
                parts = mutators.MUTATORS[name](random.Random(step_seed), parts)
            except mutators.Skip:
                parts.notes.append(f"{name}: skipped")
        return parts

    def new_case(self, index: int) -> tuple[dict, Any]:
        import mutators
        rng = random.Random(f"ipxfuzz:{self.args.seed}:{index}")
        if self.corpus and rng.random() < 0.3:
            base = rng.choice(self.corpus)
            spec = {"seed": base["seed"], "steps": list(base["steps"]), "rehash": base["rehash"]}
        else:
            spec = {"seed": rng.choice(sorted(self.seeds)), "steps": [], "rehash": rng.random() < self.args.rehash_ratio}
        parts = self.replay(spec)
        for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4])):
            for _attempt in range(8):  # draw until a mutator applies
                name = rng.choices(self.names, self.weights)[0]
                step_seed = rng.getrandbits(32)
                trial = parts.copy()
                try:
                    trial = mutators.MUTATORS[name](random.Random(step_seed), trial)
                except mutators.Skip:
                    continue
                except Exception as e:  # a bug in the mutator, not a finding: count it, draw another
                    self.stats["mutator_errors"][f"{name}: {type(e).__name__}: {e}"[:160]] += 1
                    continue
                parts = trial
                spec["steps"].append([name, step_seed])
                break
        if spec["rehash"]:  # help the edits past the manifest/graph/tensor cross-checks
            for fixup in mutators.FIXUPS:
                if rng.random() < 0.5:
                    trial = parts.copy()
                    try:
                        parts = mutators.MUTATORS[fixup](random.Random(0), trial)
                    except Exception:  # Skip, or a graph mangled past what the fixup understands
                        continue
                    spec["steps"].append([fixup, 0])
        spec["input_seed"] = rng.getrandbits(32)
        spec["index"] = index
        return spec, parts

    # ---- running cases ----------------------------------------------------------------------------------------------
    def run(self, spec: dict, parts) -> dict | None:
        import harness
        path = self.tmp / "case.ipxc"
        try:
            path.write_bytes(parts.build())
        except Exception as e:  # the writer could not express this mutant: a fuzzer limitation
            self.stats["mutator_errors"][f"build: {type(e).__name__}: {e}"[:160]] += 1
            return None
        stages = list(harness.STAGES)
        touches_manifest = any(n.startswith(("manifest_", "json_", "metadata_")) for n, _ in spec["steps"])
        if not touches_manifest and spec["input_seed"] % 4:  # the text report is the slowest stage: 1 case in 4
            stages.remove("inspect_text")
        return harness.execute(path, self.inputs[spec["seed"]], spec["input_seed"], self.limits, stages)

    def record(self, spec: dict, parts, result: dict) -> None:
        self.stats["cases"] += 1
        self.stats["outcomes"][result["outcome"]] += 1
        for name in {n for n, _ in spec["steps"]}:
            self.stats["mutators"].setdefault(name, Counter())[result["outcome"]] += 1
        for r in result["stages"]:
            self.stats["stage_outcomes"].setdefault(r["stage"], Counter())[r["outcome"]] += 1
            self.stats["stage_seconds"][r["stage"]] += r.get("seconds", 0.0)
        self.stats["case_seconds"] += result["seconds"]
        load = next((r for r in result["stages"] if r["stage"] == "load"), None)
        if load is not None:
            if load["outcome"] == "project_error":
                self.stats["stopped_at"][_refusal(load)] += 1
            hashed = "re-hashed" if spec["rehash"] else "not re-hashed"
            stopped = load["outcome"] == "project_error" and "hash" in load.get("message", "")
            self.stats["integrity"][f"{hashed}: {'stopped by a hash check' if stopped else 'past the hash checks'}"] += 1
        if result["outcome"] in ("ok", "skipped") and len(spec["steps"]) <= 8 and len(self.corpus) < 200:
            self.corpus.append({k: spec[k] for k in ("seed", "steps", "rehash")})
        for finding in result["findings"]:
            key = tuple(finding["key"])
            if key in self.findings:
                self.findings[key]["count"] += 1
                continue
            self.findings[key] = {"count": 1}
            self.save(key, finding, *self.minimize(spec, parts, key))

    def minimize(self, spec: dict, parts, key: tuple) -> tuple[dict, Any, dict | None]:
        """The shortest sub-chain of the steps (single steps, then one step left out) that gives the same key."""
        steps = spec["steps"]
        if self.args.no_minimize or len(steps) <= 1:
            return spec, parts, None
        candidates = [[s] for s in steps] + [steps[:i] + steps[i + 1:] for i in range(len(steps))]
        best, best_parts, tries = spec, parts, 0
        for cand in candidates:
            if len(cand) >= len(best["steps"]) or tries >= 10:
                continue
            tries += 1
            trial = {**spec, "steps": cand}
            trial_parts = self.replay(trial)
            result = self.run(trial, trial_parts)
            if result is not None and key in {tuple(f["key"]) for f in result["findings"]}:
                best, best_parts = trial, trial_parts
        return best, best_parts, (spec if best is not spec else None)

    def save(self, key: tuple, finding: dict, spec: dict, parts, original: dict | None) -> None:
        digest = hashlib.sha1(json.dumps(list(key)).encode()).hexdigest()[:10]
        folder = self.args.out / f"{key[0]}-{digest}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "artifact.ipxc").write_bytes(parts.build())
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in self.inputs[spec["seed"]].items()}, str(folder / "inputs.safetensors"))
        record = {"key": list(key), **{k: v for k, v in finding.items() if k != "key"},
                  "case": {**spec, "fuzz_seed": self.args.seed, "seed_artifact": spec["seed"]},
                  "mutations": parts.notes, "minimized_from": original["steps"] if original else None,
                  "reproduce": [f"python fuzz/fuzz_artifact.py --replay {folder}", f"python {folder / 'repro.py'}"]}
        (folder / "case.json").write_text(json.dumps(record, indent=2, default=str))
        (folder / "repro.py").write_text(REPRO.format(outcome=key[0], what=" / ".join(map(str, key[1:])),
                                                      stage=finding.get("stage") or "load",
                                                      input_seed=spec["input_seed"], fuzz_dir=HERE))
        self.findings[key].update({"folder": str(folder), "stage": finding.get("stage"),
                                   "message": (finding.get("message") or finding.get("args") or "")[:200],
                                   "mutations": parts.notes})

    # ---- the loop -----------------------------------------------------------------------------------------------------
    def fuzz(self, seconds: float, max_cases: int | None, stride: int = 1, offset: int = 0) -> None:
        start = last_report = time.monotonic()
        index = offset
        while time.monotonic() - start < seconds and (max_cases is None or self.stats["cases"] < max_cases):
            spec, parts = self.new_case(index)
            index += stride
            result = self.run(spec, parts)
            if result is not None:
                self.record(spec, parts, result)
            if time.monotonic() - last_report > 15:
                last_report = time.monotonic()
                print(f"[{last_report - start:5.0f} s] {self.stats['cases']} cases, {len(self.findings)} unique findings",
                      file=sys.stderr, flush=True)
        self.stats["seconds"] = round(time.monotonic() - start, 1)

    def summary(self) -> dict:
        return {"cases": self.stats["cases"], "seconds": self.stats.get("seconds"), "fuzz_seed": self.args.seed,
                "seeds": sorted(self.seeds), "outcomes": dict(self.stats["outcomes"]),
                "stage_outcomes": {k: dict(v) for k, v in self.stats["stage_outcomes"].items()},
                "stage_seconds": {k: round(v, 2) for k, v in self.stats["stage_seconds"].items()},
                "case_seconds": round(self.stats["case_seconds"], 2),
                "integrity": dict(self.stats["integrity"]), "load_stopped_at": dict(self.stats["stopped_at"].most_common()),
                "mutators": {k: dict(v) for k, v in sorted(self.stats["mutators"].items())},
                "mutator_errors": dict(self.stats["mutator_errors"]),
                "findings": [{"key": list(k), **v} for k, v in self.findings.items()]}

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _refusal(result: dict) -> str:
    """A short label of where and why loading refused a case: function, then the message's first words
    (without the file path the loader puts in front)."""
    message = result.get("message", "").replace(str(Path(tempfile.gettempdir())), "")
    message = re.sub(r"^\S*case\.ipxc:? ?", "", message)
    words = [w for w in re.sub(r"[^A-Za-z0-9_ ]", " ", message).split() if w.isalpha()][:5]
    return f"{(result.get('project_frame') or '?').split(' in ')[-1]}: {' '.join(words)}"


REPRO = '''"""Reproduces a fuzzer finding in this process, with the traceback: {outcome} ({what}) in stage {stage}.

    python repro.py     (from anywhere; needs the ipexconvert checkout's fuzz/ folder at {fuzz_dir})
"""
import sys
from pathlib import Path

sys.path.insert(0, "{fuzz_dir}")
from safetensors.torch import load_file  # noqa: E402

import harness  # noqa: E402

here = Path(__file__).resolve().parent
ctx = harness.Context(here / "artifact.ipxc", load_file(str(here / "inputs.safetensors")), {input_seed}, harness.Limits())
for stage in harness.STAGES:
    print("stage", stage, flush=True)
    try:
        harness.STAGES[stage](ctx)
    except harness.SkipStage as e:
        print("  skipped:", e)
    except Exception as e:
        if stage == "{stage}":
            raise
        print("  ", type(e).__name__, str(e)[:300])
    if stage == "{stage}":
        break
'''


# ---- setup and reporting ------------------------------------------------------------------------------------------


def self_check(fuzzer: Fuzzer) -> list[str]:
    """Problems that would make the run meaningless: a seed that does not load and run cleanly, or an unmutated
    seed rewritten by the fuzzer (re-hashed, or not) that does not (the re-hashing no longer matches artifact.py)."""
    import harness
    problems = []
    for name, path in fuzzer.seed_paths.items():
        for label, data in (("seed file", None), ("rewritten and re-hashed", True), ("rewritten, hashes kept", False)):
            target = path
            if data is not None:
                parts = fuzzer.seeds[name].copy()
                parts.rehash = data
                target = fuzzer.tmp / "self-check.ipxc"
                target.write_bytes(parts.build())
            result = harness.execute(target, fuzzer.inputs[name], 1, fuzzer.limits)
            bad = [r for r in result["stages"] if r["outcome"] not in ("ok", "skipped")] + result["findings"]
            if bad or result["outcome"] not in ("ok", "skipped"):
                problems.append(f"{name} ({label}): {json.dumps(bad, default=str)[:1500]}")
    return problems


def warm_up(seed_paths: dict[str, Path], inputs: dict) -> None:
    """Load and run every seed once in this process, so one-time set-up (native modules, oneDNN's self-check,
    ISA probes) happens here and not again in every child."""
    import ipexconvert
    import harness
    for name, path in seed_paths.items():
        ipexconvert.load_artifact(path).run_dict(dict(inputs[name]))
    for name, path in list(seed_paths.items())[:1]:  # imports the CLI (typer, rich) and inspection once
        ctx = harness.Context(path, inputs[name], 0, harness.Limits())
        harness.stage_inspect_text(ctx)
        harness.stage_inspect_json(ctx)


def print_summary(s: dict, out: Path) -> None:
    import harness
    w = sys.stdout.write
    w(f"\nipexconvert artifact fuzzer: {s['cases']} cases in {s['seconds']} s (seed {s['fuzz_seed']}; "
      f"seeds {', '.join(s['seeds'])})\n")
    w("outcomes: " + ", ".join(f"{k} {s['outcomes'][k]}" for k in harness.OUTCOMES if k in s["outcomes"]) + "\n")
    w("per stage: " + "; ".join(f"{stage}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                                for stage, c in s["stage_outcomes"].items()) + "\n")
    w("integrity: " + ", ".join(f"{k} {v}" for k, v in sorted(s["integrity"].items())) + "\n")
    w("loading refused at (top 12):\n" + "".join(f"  {v:5} {k}\n" for k, v in list(s["load_stopped_at"].items())[:12]))
    w(f"\n{'mutator':28} {'cases':>6} {'ok':>5} {'refused':>8} {'findings':>9}\n")
    for name, c in s["mutators"].items():
        found = sum(c.get(k, 0) for k in harness.FAILING)
        w(f"{name:28} {sum(c.values()):6} {c.get('ok', 0) + c.get('skipped', 0):5} {c.get('project_error', 0):8} {found:9}\n")
    if s["mutator_errors"]:
        w(f"\nfuzzer-side errors (not findings): {sum(s['mutator_errors'].values())}\n")
        for k, v in list(s["mutator_errors"].items())[:10]:
            w(f"  {v} x {k}\n")
    w(f"\nfindings: {len(s['findings'])} unique" + (f", saved under {out}" if s["findings"] else "") + "\n")
    for f in sorted(s["findings"], key=lambda f: -harness.SEVERITY[f["key"][0]]):
        w(f"  [{f['key'][0]}] {f['key'][1]} at {f['key'][2]} (stage {f.get('stage')}, x{f['count']})\n")
        if f.get("message"):
            w(f"      {f['message'][:160]}\n")
        w(f"      {f.get('folder')}\n")


def merge(summaries: list[dict]) -> dict:
    """One summary of several workers' (--jobs)."""
    out = summaries[0]
    for s in summaries[1:]:
        out["cases"] += s["cases"]
        for key in ("outcomes", "integrity", "load_stopped_at", "mutator_errors"):
            out[key] = dict(Counter(out[key]) + Counter(s[key]))
        for key in ("mutators", "stage_outcomes"):
            for name, c in s[key].items():
                out[key][name] = dict(Counter(out[key].get(name, {})) + Counter(c))
        seen = {tuple(f["key"]): f for f in out["findings"]}
        for f in s["findings"]:
            if tuple(f["key"]) in seen:
                seen[tuple(f["key"])]["count"] += f["count"]
            else:
                out["findings"].append(f)
                seen[tuple(f["key"])] = f
    return out


def run_workers(args: argparse.Namespace, argv: list[str]) -> list[dict]:
    procs, files = [], []
    for k in range(args.jobs):
        summary = args.out / f".worker-{k}.json"
        files.append(summary)
        cmd = [sys.executable, __file__, *argv, "--worker", str(k), "--summary-json", str(summary)]
        procs.append(subprocess.Popen(cmd, env=os.environ, stdout=subprocess.DEVNULL))
    for p in procs:
        p.wait()
    summaries = []
    for f in files:
        if not f.exists():
            raise SystemExit(f"a worker wrote no summary ({f}); see its messages above")
        summaries.append(json.loads(f.read_text()))
        f.unlink()
    return summaries


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    import mutators
    if args.list_mutators:
        for name in mutators.MUTATORS:
            doc = (mutators.MUTATORS[name].__doc__ or "").strip().split("\n")[0]
            print(f"{name:28} {doc}")
        return 0
    os.environ["IPEXCONVERT_MAX_TENSOR_BYTES"] = str(args.max_tensor_bytes)
    warnings.simplefilter("ignore")
    args.out = args.out.resolve()
    from seeds import ensure_seeds, make_seeds

    names = args.seeds.split(",")
    try:
        seed_paths = ensure_seeds(args.seeds_dir, names, env=_USER_ENV)
    except RuntimeError as e:
        print(f"setup failed: {e}", file=sys.stderr)
        return 2

    if args.replay is not None:
        return replay_main(args, seed_paths)

    if args.jobs > 1 and args.worker is None:
        args.out.mkdir(parents=True, exist_ok=True)
        worker_argv = [a for a in argv]
        summaries = run_workers(args, worker_argv)
        summary = merge(summaries)
        return report(summary, args)

    fuzzer = Fuzzer(args, seed_paths)
    try:
        try:
            warm_up(seed_paths, fuzzer.inputs)
        except Exception as e:  # seeds made by an older tree: make them again, once
            if args.worker is not None:
                return _setup_failed("the seeds do not load and run", e)
            print(f"the cached seeds do not load ({type(e).__name__}: {e}); making them again", file=sys.stderr)
            fuzzer.close()
            try:
                make_seeds(args.seeds_dir, names, env=_USER_ENV)
                fuzzer = Fuzzer(args, seed_paths)
                warm_up(seed_paths, fuzzer.inputs)
            except Exception as e:
                return _setup_failed("the seeds cannot be made, or do not load and run once made", e)
        problems = self_check(fuzzer)
        if problems:
            print("setup failed: the seeds do not load and run cleanly in the harness, or the fuzzer's rewriting of "
                  "them does not (if artifact.py changed its hash scheme, update fuzz/parts.py):\n  "
                  + "\n  ".join(problems), file=sys.stderr)
            return 2
        stride, offset = (args.jobs, args.worker) if args.worker is not None else (1, 0)
        max_cases = None if args.max_cases is None else (args.max_cases + args.jobs - 1 - offset) // args.jobs
        fuzzer.fuzz(args.seconds, max_cases, stride, offset)
        summary = fuzzer.summary()
    finally:
        fuzzer.close()
    if args.worker is not None:
        args.summary_json.write_text(json.dumps(summary, default=str))
        return 0
    return report(summary, args)


def _setup_failed(what: str, e: Exception) -> int:
    import traceback
    print(f"setup failed: {what} (is the tree in a working state?):\n"
          + "".join(traceback.format_exception(e))[-4000:], file=sys.stderr)
    return 2


def report(summary: dict, args: argparse.Namespace) -> int:
    print_summary(summary, args.out)
    if args.summary_json is not None:
        args.summary_json.parent.mkdir(parents=True, exist_ok=True)
        args.summary_json.write_text(json.dumps(summary, indent=2, default=str))
    if summary["findings"]:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return 1 if summary["findings"] else 0


def _seed_of(path: Path, seed_paths: dict[str, Path]) -> str:
    """The seed an artifact was probably made from (its manifest's example name and dtype), else the first."""
    try:
        from parts import Parts
        m = Parts.read(path.read_bytes()).manifest
        name = f"{m['source']['location'].split(':')[-1]}.{m['dtype']}"
        if name in seed_paths:
            return name
    except Exception:
        pass
    return next(iter(seed_paths))


def replay_main(args: argparse.Namespace, seed_paths: dict[str, Path]) -> int:
    """--replay: one artifact file, or a finding folder (its artifact, inputs and input seed)."""
    import harness
    from parts import Parts
    target = args.replay
    input_seed = 1
    if target.is_dir():
        case = json.loads((target / "case.json").read_text())
        input_seed = case["case"]["input_seed"]
        from safetensors.torch import load_file
        inputs = load_file(str(target / "inputs.safetensors"))
        target = target / "artifact.ipxc"
    else:
        name = _seed_of(target, seed_paths)
        inputs = Parts.read(seed_paths[name].read_bytes()).example_inputs()
        print(f"(calling it with {name}'s example inputs)", file=sys.stderr)
    seed = _seed_of(target, seed_paths)
    warm_up({seed: seed_paths[seed]}, {seed: Parts.read(seed_paths[seed].read_bytes()).example_inputs()})
    result = harness.execute(target, inputs, input_seed, harness.Limits(args.timeout, args.mem_mb << 20))
    print(json.dumps(result, indent=2, default=str))
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
