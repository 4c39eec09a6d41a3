"""The client installs on its own: a fresh virtualenv gets `libravdb-client` and msgspec,
nothing of the daemon (no numpy, no onnxruntime), and talks to a real daemon."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from libravdb_client.testing import DaemonProcess

CLIENT_DIR = Path(__file__).resolve().parent.parent
ALLOWED = {"libravdb-client", "msgspec", "pip", "setuptools"}

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from libravdb_client import Client
    with Client(sys.argv[1]) as c:
        note = {"role": "user", "content": "The spare key is under the blue pot."}
        stored = c.ingest("alone", [note])
        ctx = c.assemble("other", prompt="Where is the spare key?", token_budget=4000,
                         namespace="session:alone")
        print(json.dumps({"ok": c.health().ok, "ingested": stored.ingested,
                          "recalled": "blue pot" in ctx.system_prompt_addition}))
    """
)


def _run(*argv: str | Path, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_client_installs_alone_and_talks_to_the_daemon(tmp_path: Path, home: Path) -> None:
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, CLIENT_DIR)
    import msgspec

    _run(
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "-d",
        wheels,
        f"msgspec=={msgspec.__version__}",
    )
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    _run(py, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheels, "libravdb-client")
    installed = {
        p["name"].lower() for p in json.loads(_run(py, "-m", "pip", "list", "--format=json"))
    }
    assert installed <= ALLOWED, installed - ALLOWED
    assert "libravdb-client" in installed
    probe = subprocess.run([py, "-c", "import numpy"], capture_output=True, check=False)
    assert probe.returncode != 0  # the daemon's dependencies stayed out

    with DaemonProcess.start("tcp", data_dir=tmp_path / "data", home=home) as daemon:
        out = _run(py, "-c", SCRIPT, daemon.endpoint)
    assert json.loads(out) == {"ok": True, "ingested": 1, "recalled": True}
