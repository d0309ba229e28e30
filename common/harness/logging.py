"""Progress between chunks, and the run folder.

The driver (common/harness/run.py) hands `RunLogger.on_chunk` each chunk's metrics
(`[num_seeds, updates in the chunk]`) as the run goes: it moves the progress bar or prints
one plain line (common/harness/console.py; means over the chunk's updates and over seeds,
`-` where no episode ended), appends the same to `progress.jsonl` and logs it to wandb
(keys `seed_<i>/<metric>` plus `mean/<metric>`). Only process 0 of a multi-process run prints or
writes; the metrics it receives cover every seed.

A run folder `<out_dir>/<algo>__<env>__<time>/` holds `config.json` and `provenance.json` (what
produced the run: scanrl's version and commit, package versions, the algorithm file's hash;
common/harness/provenance.py), both written first,
`progress.jsonl` (written as the run goes; `seconds` is training time so far), and at the
end `metrics.npz` (every per-update metric, `[num_seeds, num_updates]`), `params.npz` (the
final policy, leading axis = seed), `summary.json` and `curves.png` (common/harness/plots.py).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from scanrl.common.harness import console, provenance
from scanrl.common.harness.stats import differ_widely, final_returns, latest_mean, nanmean


def _finite_or_none(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def is_eval(metric: str) -> bool:
    """An evaluation's metric (NaN between evaluations): eval_return, eval_return_sampled, and
    the env's outcomes the same way (eval_win_rate, eval_win_rate_sampled)."""
    return metric.startswith("eval_")


def _last_finite(x: np.ndarray) -> np.ndarray:
    """Per row of [seeds, n], the last non-NaN value (NaN if none)."""
    out = np.full(x.shape[0], np.nan)
    for i, row in enumerate(x):
        finite = np.nonzero(~np.isnan(row))[0]
        if finite.size:
            out[i] = row[finite[-1]]
    return out


def _short(x: float) -> str:
    """A return in a progress line: one decimal below 1000, none from there (-1178, 123.4)."""
    return f"{float(x):.1f}" if abs(x) < 1000 else f"{float(x):.0f}"




def evaluation_lines(summary: dict[str, Any]) -> list[str]:
    """The final table's evaluation: both policies' latest mean return, --eval-policy's first,
    and one more line where they differ widely (an argmax policy that loops where its samples
    reach the goal; a mode that never explores its way out)."""
    sampled = summary.get("eval_return_sampled_mean")
    # run folders written before the key named its policy call it eval_return_mean
    deterministic = summary.get("eval_return_deterministic_mean", summary.get("eval_return_mean"))
    if sampled is None and deterministic is None:
        return []
    parts = [("sampled", sampled), ("deterministic", deterministic)]
    if summary.get("eval_policy") == "deterministic":
        parts.reverse()
    lines = [
        "last evaluation, mean over seeds: "
        + ", ".join(f"{n} {v:.2f}" for n, v in parts if v is not None)
    ]
    if sampled is not None and deterministic is not None and differ_widely(sampled, deterministic):
        lines.append(
            f"note: the deterministic policy returns {deterministic:.2f} where the sampled one"
            f" returns {sampled:.2f}; --eval-policy picks the one the stop conditions read"
            f" ({summary.get('eval_policy')} here)."
        )
    return lines




def latest_returns(episode_return: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[seeds, updates] -> (return, update) [seeds]: each seed's latest update in which an episode
    ended, counted from 1, and that update's mean return (NaN and 0 where none ended): what the
    table shows for a seed whose episodes outlast the last 10% of updates."""
    ended = ~np.isnan(episode_return)
    last = episode_return.shape[1] - 1 - np.argmax(ended[:, ::-1], axis=1)  # where any ended
    some = ended.any(axis=1)
    return (np.where(some, episode_return[np.arange(len(last)), last], np.nan),
            np.where(some, last + 1, 0))  # updates count from 1


def new_run_dir(out_dir: str | Path, algo: str, env: str, kind: str = "") -> Path:
    """A new folder name `<out_dir>/<algo>__<env>__<time>` (`-2`, `-3`, ... if taken); not created.
    `kind` ("sweep", "pbt") names a sweep's or a population's folder:
    `<algo>__<env>__sweep-<time>`."""
    stamp, env = time.strftime("%Y%m%d-%H%M%S"), env.replace(
        "/", "-"
    )  # brax/ant: ppo__brax-ant__<time>
    stamp = f"{kind}-{stamp}" if kind else stamp
    path, suffix = Path(out_dir) / f"{algo}__{env}__{stamp}", 1
    while path.exists():
        suffix += 1
        path = Path(out_dir) / f"{algo}__{env}__{stamp}-{suffix}"
    return path

def check_out_dir(out_dir: str) -> None:
    """ValueError with one sentence where `--out-dir` cannot take a new run folder."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out-dir {out_dir} is a file, not a folder.")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    # the real test (permissions, read-only mounts, root): create something there, then remove it
    try:
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as e:
        raise ValueError(
            f"--out-dir {out_dir} is not writable ({existing}: {e.strerror})."
        ) from None


class RunLogger:
    """Host side of a run: progress lines, wandb, and the run folder.

    Only process 0 of a multi-process run writes or prints (`active`).
    """

    def __init__(
        self, *, algo: str, env: str, config: dict[str, Any], num_seeds: int, steps_per_update: int,
        num_updates: int | None, out_dir: str = "runs", wandb_mode: str = "disabled",
        wandb_project: str = "scanrl", first_seed: int = 0, progress: bool = True,
        run_dir: str | None = None, resume_update: int = 0, num_configs: int = 1,
    ):
        """num_updates: None for a run without a budget (until a stop condition holds).
        run_dir, resume_update: continue that run folder from a checkpoint at that update
        (progress.jsonl keeps its records up to it)."""
        # A sweep's rows are (config, seed) pairs, config-major: num_configs * num_seeds of them.
        self.num_configs, self.seeds_per_config = num_configs, num_seeds
        num_seeds *= num_configs
        self.algo, self.env, self.num_seeds = algo, env, num_seeds
        self.steps_per_update, self.num_updates = steps_per_update, num_updates
        self.first_seed, self.progress = first_seed, progress
        self.active = jax.process_index() == 0
        self._bar, self._resumed_at, self._session_seconds, self._last_eval = (
            None, resume_update, 0.0, ("", ""),
        )
        # the evaluation shown first (and read by the stop conditions): --eval-policy's
        self.eval_policy = config.get("eval_policy", "sampled")
        self.population = bool(config.get("pbt"))  # a sweep's rows are a --pbt population
        kind = "pbt" if self.population else "sweep" if num_configs > 1 else ""
        self.run_dir = Path(run_dir) if run_dir else new_run_dir(out_dir, algo, env, kind)
        self._wandb = None
        if not self.active:
            return
        self.run_dir.mkdir(parents=True, exist_ok=bool(run_dir))
        (self.run_dir / "config.json").write_text(
            json.dumps({"algo": algo, **config}, indent=2, default=str) + "\n"
        )
        provenance.record(
            self.run_dir, resume_update, algo, config.get("algo_file"), resumed=bool(run_dir)
        )
        progress_file = self.run_dir / "progress.jsonl"
        self._seconds = 0.0  # training seconds so far (compile excluded), over every resume
        if (
            run_dir and progress_file.exists()
        ):  # drop what was logged after the checkpoint: it is redone
            kept = [
                l
                for l in progress_file.read_text().splitlines()
                if l and json.loads(l)["update"] <= resume_update
            ]
            progress_file.write_text("".join(l + "\n" for l in kept))
            self._seconds = json.loads(kept[-1]).get("seconds", 0.0) if kept else 0.0
        self._progress = open(progress_file, "a", buffering=1)
        if wandb_mode != "disabled":
            import wandb

            self._wandb = wandb.init(
                project=wandb_project, mode=wandb_mode, dir=str(self.run_dir),
                name=self.run_dir.name, config=config,
            )

    def say(self, text: str, command: str = "") -> None:
        """A sentence (wrapped to the console) and a command to copy on its own line."""
        if self.active:  # above the bar, if one is shown (rich redirects stdout)
            console.say(text)
            if command:
                print(console.command(command), flush=True)

    def start_display(self, compile_seconds: float, done: int) -> None:
        """After the compile: the spinner gives way to the progress bar (on a terminal)."""
        console.COMPILING.stop(said=f"compiled in {compile_seconds:.1f} s")
        if self.active and self.progress and console.interactive():
            self._bar = console.Bar(f"{self.algo} {self.env}", self.num_updates, done)

    def stop_display(self) -> None:
        console.COMPILING.stop()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def on_chunk(self, updates_done: int, metrics: dict[str, np.ndarray], seconds: float) -> None:
        """After each chunk: metrics name -> [num_seeds, n] of its n updates, which took
        `seconds`."""
        if not self.active:
            return
        n = next(iter(metrics.values())).shape[1]
        steps = updates_done * self.steps_per_update
        sps = n * self.steps_per_update * self.num_seeds / seconds if seconds > 0 else float("nan")
        with np.errstate(all="ignore"):  # a metric that is NaN over the whole chunk stays NaN
            table = {k: (_last_finite(v) if is_eval(k)  # the chunk's latest evaluation
                         else nanmean(v, axis=1)) for k, v in metrics.items()}
        self._session_seconds += seconds
        remaining = self.num_updates - updates_done if self.num_updates else None
        eta = console.eta(self._session_seconds, updates_done - self._resumed_at, remaining)
        # Shown: the average since this process started training, which ends at summary.json's
        # figure; a chunk's own rate dips at the last, partly masked chunk (progress.jsonl keeps
        # it).
        average = (
            (updates_done - self._resumed_at)
            * self.steps_per_update
            * self.num_seeds
            / self._session_seconds
            if self._session_seconds > 0
            else float("nan")
        )
        if self._bar is not None:
            texts = self._stats(average, table)
            # "eval 1.0" where "eval sampled 1.0" does not fit (80 columns)
            compact = [t.replace(f"eval {self.eval_policy} ", "eval ") for t in texts]
            self._bar.update(updates_done, eta, texts, compact)
        elif self.progress:
            print(self._line(updates_done, steps, average, table, eta), flush=True)
        self._seconds += seconds
        record = {
            "update": updates_done,
            "steps_per_seed": steps,
            "seconds": round(self._seconds, 4),
            "env_steps_per_second": _finite_or_none(sps),
            "seeds": [self.first_seed + i % self.seeds_per_config for i in range(self.num_seeds)],
            **(
                {"configs": [i // self.seeds_per_config for i in range(self.num_seeds)]}
                if self.num_configs > 1
                else {}
            ),
            "per_seed": {k: [_finite_or_none(v) for v in vals] for k, vals in table.items()},
        }
        self._progress.write(json.dumps(record) + "\n")
        if self._wandb is not None:
            logged = {}
            for k, vals in table.items():
                for i, v in enumerate(vals):
                    if math.isfinite(v):
                        logged[f"{self._row_name(i)}/{k}"] = float(v)
                mean = float(nanmean(vals))
                if math.isfinite(mean):
                    logged[f"mean/{k}"] = mean
            if math.isfinite(sps):
                logged["env_steps_per_second"] = sps
            self._wandb.log(logged, step=steps)

    def _row_name(self, i: int) -> str:
        seed = f"seed_{self.first_seed + i % self.seeds_per_config}"
        return f"config_{i // self.seeds_per_config}/{seed}" if self.num_configs > 1 else seed

    def _returns(self, table: dict[str, np.ndarray]) -> tuple[str, str, str, str]:
        """('return 123.4' or 'return -', '[min, max]' over seeds, the evaluation of --eval-policy
        ('eval sampled 500.0' / 'eval deterministic 9.5') or '', the other policy's
        ('deterministic 9.5' / 'sampled 500.0') or '')."""
        ret = table.get("episode_return")
        shown, spread, evaluated, other = "return -", "", "", ""
        if ret is not None and not np.all(np.isnan(ret)):
            shown = f"return {_short(nanmean(ret))}"
            spread = f"[{_short(np.nanmin(ret))}, {_short(np.nanmax(ret))}]" if ret.size > 1 else ""
        policies = [("eval_return_sampled", "sampled"), ("eval_return", "deterministic")]
        if self.eval_policy != "sampled":
            policies.reverse()
        for i, (key, name) in enumerate(policies):
            values = table.get(key)
            if values is not None and not np.all(np.isnan(values)):
                text = f"{name} {_short(nanmean(values))}"
                evaluated, other = (f"eval {text}", other) if i == 0 else (evaluated, text)
        return shown, spread, evaluated, other

    def _stats(self, sps: float, table: dict[str, np.ndarray]) -> list[str]:
        """The bar's texts after the update count, elapsed time and ETA, the most important
        first: the latest return, env steps/s, evaluation (the bar keeps the latest), the other
        policy's evaluation."""
        shown, _, evaluated, other = self._returns(table)
        self._last_eval = evaluated, other = (evaluated, other) if evaluated else self._last_eval
        speed = f"{console.si(sps)} env steps/s" if math.isfinite(sps) else "- env steps/s"
        return [shown, speed, evaluated, other]

    def _line(
        self, update: int, steps: int, sps: float, table: dict[str, np.ndarray], eta: float
    ) -> str:
        """One plain progress line of at most console.WIDTH characters: what does not fit is
        left out, steps per seed first, then the spread over seeds, the other policy's
        evaluation, the evaluation's policy name ("eval sampled 9.5" -> "eval 9.5"), the ETA,
        the evaluation."""
        total = f"/{self.num_updates}" if self.num_updates else ""
        head = f"[{self.algo} {self.env}] update {update}{total}"
        speed = f"{console.si(sps)} env steps/s" if math.isfinite(sps) else "- env steps/s"
        shown, spread, evaluated, other = self._returns(table)
        evals = f"{evaluated} ({other})" if evaluated and other else evaluated
        left = f"ETA {console.clock(eta)}" if math.isfinite(eta) else ""
        short = evaluated.replace(f"eval {self.eval_policy} ", "eval ")
        return console.fit(
            [
                head,
                f"{console.si(steps)} steps/seed",
                speed,
                f"{shown} {spread}".strip(),
                evals,
                left,
            ],
            [head, speed, f"{shown} {spread}".strip(), evals, left],
            [head, speed, shown, evals, left],
            [head, speed, shown, evaluated, left],
            [head, speed, shown, short, left],
            [head, speed, shown, evaluated],
            [head, speed, shown, short],
            [head, speed, shown],
        )

    def finish(
        self, *, metrics: dict[str, np.ndarray], params: Any, total_timesteps: int,
        compile_seconds: float, run_seconds: float, wall_seconds: float,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write metrics.npz, params.npz and summary.json; print the final table; return the
        summary.

        metrics: name -> [num_seeds, updates trained]; params: pytree with leaves [num_seeds, ...];
        extra: more summary.json entries. Every process must call it (it only writes on process 0).
        """
        self.stop_display()
        metrics = {k: np.asarray(v) for k, v in metrics.items()}
        final = final_returns(metrics["episode_return"])  # over the updates trained
        latest_ended = latest_returns(metrics["episode_return"])
        latest = {
            k: (
                _finite_or_none(latest_mean(metrics[k]))
                if k in metrics and not np.all(np.isnan(metrics[k]))
                else None
            )
            for k in ("eval_return", "eval_return_sampled")
        }
        # This process's steps: a resumed run's earlier updates took none of run_seconds.
        steps_all_seeds = (
            total_timesteps - self._resumed_at * self.steps_per_update
        ) * self.num_seeds
        summary = {
            "algo": self.algo,
            "env": self.env,
            "num_seeds": self.seeds_per_config,
            **({"num_configs": self.num_configs} if self.num_configs > 1 else {}),
            "total_timesteps": total_timesteps,
            "final_return_per_seed": [_finite_or_none(x) for x in final],
            "final_return_mean": _finite_or_none(nanmean(final)),
            "final_return_std": (
                _finite_or_none(np.nanstd(final)) if not np.all(np.isnan(final)) else None
            ),
            # where no episode ended in the last 10%: the latest that did ([seeds]; null, 0: none at
            # all)
            "latest_return_per_seed": [_finite_or_none(x) for x in latest_ended[0]],
            "latest_return_update_per_seed": [int(u) for u in latest_ended[1]],
            "eval_return_deterministic_mean": latest["eval_return"],
            "eval_return_sampled_mean": latest["eval_return_sampled"],
            # the env's outcomes of the latest evaluation (SMAX: eval_win_rate_mean, ...)
            **{f"{k}_mean": _finite_or_none(latest_mean(v)) for k, v in metrics.items()
               if is_eval(k) and not k.startswith("eval_return") and not np.all(np.isnan(v))},
            "eval_policy": self.eval_policy,  # the one the stop conditions read
            "env_steps_per_second": steps_all_seeds / run_seconds,
            "compile_seconds": compile_seconds,
            "run_seconds": run_seconds,
            "wall_seconds": wall_seconds,
            "devices": [str(d) for d in jax.devices()],
            "run_dir": str(self.run_dir),
            **(extra or {}),
        }
        if not self.active:
            return summary
        rows = (
            (self.num_configs, self.seeds_per_config) if self.num_configs > 1 else (self.num_seeds,)
        )
        np.savez(
            self.run_dir / "metrics.npz",
            **{k: v.reshape(rows + v.shape[1:]) for k, v in metrics.items()},
        )
        flat, _ = jax.tree_util.tree_flatten_with_path(params)
        np.savez(
            self.run_dir / "params.npz",
            **{
                jax.tree_util.keystr(path, simple=True, separator="/"): (
                    np.asarray(leaf).reshape(rows + leaf.shape[1:])
                )
                for path, leaf in flat
            },
        )
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        self._print_table(summary)
        self._progress.close()
        if self._wandb is not None:
            self._wandb.summary.update(
                {k: v for k, v in summary.items() if not isinstance(v, list)}
            )
            self._wandb.finish()
        return summary

    def _print_table(self, summary: dict[str, Any]) -> None:
        out = sys.stdout
        if self.num_configs > 1:  # the sweep's table (common/harness/sweeps.py) follows
            what = "population of {} members" if self.population else "sweep of {} configs"
            print(file=out)
            console.say(f"{self.algo} on {self.env}: {what.format(self.num_configs)} x"
                        f" {self.seeds_per_config} seeds")
        else:
            updates = summary.get("updates")
            if summary.get("stopped_by") == "interrupt" and updates is not None:
                heading = (
                    f"stopped at update {updates}: return per seed (mean over the last 10% of the"
                    " updates trained)"
                )
            else:
                heading = "final return per seed (mean over the last 10% of updates)"
            print(file=out)
            console.say(f"{self.algo} on {self.env}: {heading}")
            for i, r in enumerate(summary["final_return_per_seed"]):
                latest, at = (
                    summary["latest_return_per_seed"][i],
                    summary["latest_return_update_per_seed"][i],
                )
                shown = (
                    f"{r:10.2f}"
                    if r is not None
                    else (
                        "no episode ended"
                        if latest is None
                        else (
                            f"no episode ended in the last 10%; the latest that did: {latest:.2f}"
                            f" (update {at})"
                        )
                    )
                )
                console.say(f"seed {self.first_seed + i:>4}  {shown}", indent="  ")
            mean, std = summary["final_return_mean"], summary["final_return_std"]
            if mean is not None:
                print(f"  mean {mean:10.2f}  std {std:.2f}", file=out)
        if self.num_configs == 1:
            for line in evaluation_lines(summary):
                console.say(line, indent="  ")
        console.say(
            f"{summary['env_steps_per_second']:,.0f} env steps/s (all seeds, compile excluded);"
            f" compile {summary['compile_seconds']:.1f} s; wall {summary['wall_seconds']:.1f} s",
            indent="  ",
        )
        console.say(f"run\xa0folder: {self.run_dir}", indent="  ")
