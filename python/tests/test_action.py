"""Runs the composite GitHub Action (action.yml) the way a runner would, minus the install step
and the artifact upload: each `run` step in bash with its `env`, the `${{ … }}` expressions
filled from the inputs, GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files, and the outputs of one step
seen by the next.

Needs PyYAML and a conform binary: CONFORM_BIN (scripts/check-wheel sets it to the wheel's);
skipped otherwise.
"""

import os
import re
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("CONFORM_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="CONFORM_BIN is not set")


def run_action(tmp_path, inputs):
    action = yaml.safe_load(open(os.path.join(ROOT, "action.yml")))
    defaults = {k: v.get("default", "") for k, v in action["inputs"].items()}
    values = dict(defaults, **inputs)
    for name, spec in action["inputs"].items():
        if spec.get("required"):
            assert name in inputs, name
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(BIN, bindir / "conform")
    summary = tmp_path / "summary.md"
    outputs = {}
    results = []
    for step in action["runs"]["steps"]:
        if "run" not in step or step["name"] == "install conform":
            continue
        out_file = tmp_path / f"output-{len(results)}"
        out_file.write_text("")

        def fill(text):
            text = text.replace("${{ github.action_path }}", ROOT)
            text = re.sub(r"\$\{\{ inputs\.([a-z-]+) \}\}", lambda m: values[m.group(1)], text)
            return re.sub(r"\$\{\{ steps\.run\.outputs\.([a-z-]+) \}\}", lambda m: outputs.get(m.group(1), ""), text)

        env = dict(os.environ, PATH=f"{bindir}:{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
        env.update({k: fill(str(v)) for k, v in (step.get("env") or {}).items()})
        env.update(GITHUB_OUTPUT=str(out_file), GITHUB_STEP_SUMMARY=str(summary), PYTHONPATH=os.path.join(ROOT, "python"))
        p = subprocess.run(["bash", "-e", "-c", fill(step["run"])], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        for line in out_file.read_text().splitlines():
            k, _, v = line.partition("=")
            outputs[k] = v
        results.append((step["name"], p.returncode, p.stdout + p.stderr))
    return results, outputs, summary.read_text() if summary.exists() else ""


def test_the_action_judges_an_adapter_writes_the_summary_and_fails_on_failures(tmp_path):
    adapter = os.path.join(ROOT, "examples", "adapters", "kit", "adapter.py")
    results, outputs, summary = run_action(
        tmp_path, {"adapter": f"{sys.executable} {adapter}", "formats": "hermes", "args": "--strategies whole"}
    )
    assert outputs["exit-code"] == "1", results
    assert "hermes" in summary
    verdict = [r for r in results if r[0] == "verdict"][0]
    assert verdict[1] == 1 and "conform found failures" in verdict[2]


def test_a_passing_run_passes(tmp_path):
    # conform's own parser behind the kit: a corpus the toy adapter passes.
    case_dir = tmp_path / "corpus" / "hermes"
    case_dir.mkdir(parents=True)
    (case_dir / "y_one.txt").write_text('<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>')
    (case_dir / "y_one.expect.json").write_text('{"calls": [{"name": "ls", "arguments": {}}], "text": ""}')
    adapter = os.path.join(ROOT, "examples", "adapters", "kit", "adapter.py")
    results, outputs, summary = run_action(
        tmp_path, {"adapter": f"{sys.executable} {adapter}", "corpus": str(tmp_path / "corpus"), "args": "--strategies whole,tokens"}
    )
    assert outputs["exit-code"] == "0", results
    assert [r[1] for r in results] == [0, 0, 0], results
