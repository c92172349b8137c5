"""failoverbench's fault catalogue through proxai-asgi, scored by failoverbench itself.

Starts failoverbench's wall (the fake provider that breaks on purpose), proxai-asgi
configured by ``bench/failoverbench.toml`` (every scenario model routed to the wall
with the catalogue's fallback model as its Fallback), and failoverbench's runner with
its ``endpoint`` adapter; prints the runner's lines and the scorecard::

    python -m bench.failoverbench            # the fast profile (about two minutes)
    python -m bench.failoverbench --full     # the published timings (about ten)
    python -m bench.failoverbench --only S08,S14

failoverbench is not a dependency: it runs from its own checkout and virtualenv
($FAILOVERBENCH_DIR, default /tmp/failoverbench; $FAILOVERBENCH_PYTHON, default
/tmp/fbvenv/bin/python). Without them this prints how to get them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._common import PY, ROOT, free_port, process

CONFIG = ROOT / "bench" / "failoverbench.toml"
WALL_PORT = 8401  # the port bench/failoverbench.toml names; --wall-port rewrites it
# The fast profile shrinks the wall's outage (S15) from 60 s to 6 s; the primary is
# probed again after a cooldown scaled the same way, or it could not come back in time.
FAST_ENV = {"PROXAI_TARGET_COOLDOWN": "1.5"}

HOW_TO_GET = """failoverbench is not installed where this bench looks ({where}).
Get it once, outside this repository:
  git clone https://github.com/failoverbench/failoverbench /tmp/failoverbench
  python3 -m venv /tmp/fbvenv && /tmp/fbvenv/bin/pip install -e /tmp/failoverbench
or point $FAILOVERBENCH_DIR / $FAILOVERBENCH_PYTHON at your own checkout and venv."""


def locate() -> tuple[Path, str]:
    home = Path(os.environ.get("FAILOVERBENCH_DIR", "/tmp/failoverbench"))
    python = os.environ.get("FAILOVERBENCH_PYTHON", "/tmp/fbvenv/bin/python")
    if not (home / "scenarios" / "catalogue.yaml").is_file() or not Path(python).is_file():
        sys.exit(HOW_TO_GET.format(where=f"{home}, {python}"))
    return home, python


def system_yaml(directory: Path, proxy_port: int) -> Path:
    path = directory / "proxai-asgi.yaml"
    doc = {
        "name": "proxai-asgi",
        "label": "proxai-asgi",
        "adapter": "endpoint",
        "notes": "proxai-asgi configured by bench/failoverbench.toml: each scenario model "
        "routed to the wall with the catalogue's fallback model as its Fallback.",
        "params": {"base_url": f"http://127.0.0.1:{proxy_port}/v1", "api_key": "failoverbench"},
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="the full profile (real waits)")
    ap.add_argument("--only", default="", help="scenario ids, e.g. S08,S14")
    ap.add_argument("--wall-port", type=int, default=WALL_PORT,
                    help="the wall's port (default 8401, the one the .toml names)")  # fmt: skip
    args = ap.parse_args()
    home, fb_python = locate()
    profile = "full" if args.full else "fast"
    work = Path(tempfile.mkdtemp(prefix="failoverbench-"))
    config = CONFIG
    if args.wall_port != WALL_PORT:
        config = work / "failoverbench.toml"
        config.write_text(CONFIG.read_text().replace(":8401/", f":{args.wall_port}/"))
    proxy_port = free_port()
    env = {**os.environ, **({} if args.full else FAST_ENV)}
    wall = [fb_python, "-m", "failoverbench", "wall", "--profile", profile,
            "--port", str(args.wall_port)]  # fmt: skip
    proxy = [PY, "-m", "proxai_asgi", "--config", str(config), "--port", str(proxy_port),
             "--log-level", "warning"]  # fmt: skip
    run = [fb_python, "-m", "failoverbench", "run", "--system",
           str(system_yaml(work, proxy_port)), "--profile", profile, "--wall",
           f"http://127.0.0.1:{args.wall_port}", "--out", str(work / "results"),
           "--catalogue", str(home / "scenarios" / "catalogue.yaml")]  # fmt: skip
    if args.only:
        run += ["--only", args.only]
    with process(wall, args.wall_port, cwd=home), process(proxy, proxy_port, env=env):
        subprocess.run(run, cwd=home, check=True)
    catalogue = str(home / "scenarios" / "catalogue.yaml")
    report = [fb_python, "-m", "failoverbench", "report", "--profile", profile, "--results",
              str(work / "results"), "--catalogue", catalogue]  # fmt: skip
    subprocess.run(report, cwd=home, check=True)
    card = (work / "results" / profile / "SCORECARD.md").read_text()
    print(card.split("\n## Check-level detail")[0])
    doc = json.loads((work / "results" / profile / "proxai-asgi.json").read_text())
    print("summary:", doc["summary"])
    print(f"full scorecard with every check and the wall's log: {work}/results/{profile}/")


if __name__ == "__main__":
    main()
