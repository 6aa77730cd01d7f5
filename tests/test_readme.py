"""Every ```python block of the README runs as written (with JAX's default settings)."""

import os
import re

import jax
import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "README.md")


def _snippets():
  with open(README) as f:
    text = f.read()
  return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


# The snippets run op by op, as users paste them: 10-40 s each on the oldest
# stack, about 4 min of the default suite in all. They run with `-m slow`,
# which CI runs on both stacks (.ci/run).
@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_snippets())))
def test_readme_snippet_runs(index):
  code = _snippets()[index]
  # Users run with JAX's defaults, not the suite's strict settings.
  with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
    exec(compile(code, f"README.md snippet {index}", "exec"), {})  # pylint: disable=exec-used


@pytest.mark.parametrize("command", [
    'pip install -e ".[test]" && pytest -n 2',  # the newest stack
    'pip install -c .ci/oldest.txt -e ".[test]"',  # the oldest stack
])
def test_readme_names_the_ci_test_commands(command):
  with open(README) as f:
    readme = f.read()
  with open(os.path.join(os.path.dirname(README), ".ci", "run")) as f:
    ci = f.read()
  assert command in readme and command in ci
