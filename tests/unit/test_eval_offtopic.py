"""A golden set's own off-topic questions."""

from __future__ import annotations

from pathlib import Path

from gateway.tools.evaluation.run import own_offtopic


def test_a_set_with_its_own_offtopic_file_uses_it(tmp_path: Path) -> None:
    """`offtopic.jsonl` beside a set's corpus is that set's; a set without one has none
    (the `--offtopic` file then serves it)."""
    assert own_offtopic(tmp_path) is None
    (tmp_path / "offtopic.jsonl").write_text('{"text": "Which iPhone runs iOS 17?"}\n', "utf-8")
    assert own_offtopic(tmp_path) == tmp_path / "offtopic.jsonl"
