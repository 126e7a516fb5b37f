"""Answers read as their documents were written: a landed markdown page with a shell pipe in a fenced code block
and inline code is chunked, indexed, answered and shown in `rag_answers`' metadata with every character intact,
as a CommonMark renderer (the Dagster UI's kind) displays it (real PostgreSQL state store and Dagster instance)."""

from __future__ import annotations

from markdown_it import MarkdownIt

from runtime_ops_tests.support.flow import serving_v1
from runtime_ops_tests.support.rendered import shown

KEY = "notes/quokka.md"
COMMAND = 'echo \'{"quokka":"export"}\' | python -m json.tool'
# A blank line inside the block: a paragraph break to a chunker or answerer that does not know code blocks.
CODE = f"# pretty-print the quokka export\n{COMMAND}\n\n# keep the first field only\ncut -d '|' -f 1 quokka.txt"
PAGE = f"""## Pretty-printing a quokka export

Fields of a quokka export are separated by `a|b` pipes, so pretty-print the quokka payload instead:

```bash
{CODE}
```
"""
QUESTION = "How do I pretty-print a quokka export?"


def _shown(html: str) -> str:
    return shown(html)


def test_code_block_with_pipes_and_inline_code_reads_intact_in_rag_answers(
    env, postgres_url, dagster_instance, tmp_path
) -> None:
    landing = tmp_path / "landing"
    page = landing / KEY
    page.parent.mkdir(parents=True)
    page.write_text(PAGE, encoding="utf-8")
    env(database_url=postgres_url, landing=str(landing))
    store, flow = serving_v1(landing, dagster_instance)  # the page lands with the first batch and is indexed

    result = flow.materialize(
        ["rag_answers"], run_config={"ops": {"demo__rag_answers": {"config": {"questions": [QUESTION], "top_k": 1}}}}
    )
    assert result.success
    [latest] = store.answers.latest_answers(limit=1)
    assert latest["question"] == QUESTION and [s["key"] for s in latest["sources"]] == [KEY]
    # Chunked with its code block whole, and answered with it whole: fences, blank line and pipes as written.
    [(_, _, chunk)] = store.documents.chunk_texts([latest["sources"][0]["chunk_id"]]).values()
    assert f"```bash\n{CODE}\n```" in chunk
    assert f"```bash\n{CODE}\n```" in latest["answer"]
    assert "##" not in latest["answer"], "heading markers are debris in an answer"

    markdown = result.asset_materializations_for_node("demo__rag_answers")[0].metadata["answers"].value
    assert isinstance(markdown, str)
    renderer = MarkdownIt("commonmark").enable("table")
    tokens = renderer.parse(markdown)
    # The answer's code block is a code block, with the code's characters; the inline code stays inline code.
    assert [(t.info, t.content) for t in tokens if t.type == "fence"] == [("bash", CODE + "\n")]
    inline_code = [c.content for t in tokens if t.type == "inline" for c in t.children or [] if c.type == "code_inline"]
    assert "a|b" in inline_code and KEY in inline_code
    # One heading, the question's: the page's own `##` did not come along.
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == [f"1. {QUESTION}"]

    shown = _shown(renderer.render(markdown))
    assert COMMAND in shown and "cut -d '|' -f 1 quokka.txt" in shown
    assert "separated by a|b pipes" in shown
    assert KEY in shown, "the answer cites its source"
