"""The README's example is real: extract its first python block and run it."""

import os
import re
import runpy
import tempfile

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_example_runs(tmp_path):
    text = open(README).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has a python example"
    path = tmp_path / "readme_example.py"
    path.write_text(blocks[0])
    runpy.run_path(str(path), run_name="__main__")


def test_readme_commands_are_the_ci_commands():
    text = open(README).read()
    ci = open(os.path.join(os.path.dirname(__file__), "..", ".ci", "run")).read()
    test_cmd = 'python3 -m pip install -q -e ".[test]" && python3 -m pytest -q'
    assert test_cmd in text and test_cmd in ci
