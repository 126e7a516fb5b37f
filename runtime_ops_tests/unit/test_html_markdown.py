"""HTML documents become Markdown: headings, lists, tables and code blocks as fenced blocks (which the chunker keeps
whole), without the page's boilerplate; hostile pages stay bounded."""

from __future__ import annotations

import random
import re

from runtime_ops.documents.chunking import chunk_text
from runtime_ops.documents.parsing import parse_document
from runtime_ops.markdown import split_fenced

LIMIT = 10 * 1024 * 1024
CODE = 'import json\n\nwith open("data.json") as f:\n    data = json.load(f)\nprint(json.dumps(data, indent=2))'

PAGE = f"""<!DOCTYPE html>
<html><head><title>Pretty-printing JSON</title><script>track()</script></head>
<body>
<header><a href="/">ACME docs</a> <span>Search the site</span></header>
<nav><ul><li><a href="/a">All modules</a><li><a href="/b">Changelog</a></ul></nav>
<main>
<article>
<header><h1>Pretty-printing <code>json</code></h1></header>
<p>Read a file and print it indented. The <code>indent</code> argument sets the width.
<h2>Steps</h2>
<ol><li>Open the file<li>Load it with <b>json.load</b></ol>
<pre><code class="language-python">{CODE.replace("<", "&lt;")}</code></pre>
<p>Long explanations follow. {"More prose about serialisation and its options. " * 30}
<table><tr><th>option<th>meaning<tr><td>indent<td>spaces per level</table>
</article>
</main>
<aside>Related: pickle, csv</aside>
<footer>Copyright 2026 ACME. Privacy policy.</footer>
</body></html>"""


def test_html_becomes_markdown_without_boilerplate_and_its_code_block_stays_whole() -> None:
    doc = parse_document("guide/json.html", PAGE.encode(), max_bytes=LIMIT)
    assert doc.title == "Pretty-printing JSON"
    for boilerplate in ("ACME docs", "Search the site", "All modules", "Changelog", "Related", "Copyright", "track"):
        assert boilerplate not in doc.text, boilerplate
    assert doc.text.startswith("# Pretty-printing `json`\n\nRead a file and print it indented.")
    assert "\n## Steps\n\n1. Open the file\n2. Load it with **json.load**\n" in doc.text
    assert "| option | meaning |\n| --- | --- |\n| indent | spaces per level |" in doc.text
    # The <pre> block is a fenced block of the text (its indentation normalised like every document's).
    [code] = [block for block in split_fenced(doc.text) if block.code]
    assert code.text.startswith("```python\nimport json\n")
    assert 'with open("data.json") as f:\ndata = json.load(f)' in code.text
    # ... which the chunker keeps whole, in one chunk, although the document needs several.
    fence = code.text.strip()
    for max_chars in (400, 600, 1200):
        chunks = chunk_text(doc.text, max_chars=max_chars, overlap=60)
        assert len(chunks) > 1
        assert sum(fence in chunk for chunk in chunks) == 1, max_chars


def test_html_closes_what_html_closes_implicitly() -> None:
    page = b"<body><p>one<p>two<ul><li>a<li>b<ul><li>inner</ul><li>c</ul><dl><dt>t<dd>d</dl>"
    assert parse_document("p.html", page, max_bytes=LIMIT).text == "one\n\ntwo\n\n- a\n- b\n- inner\n- c\n\nt\n: d"


def test_hostile_html_stays_bounded() -> None:
    rng = random.Random(25)
    # Nesting past any recursion limit: kept as text, neither a RecursionError nor a quarantine.
    deep = ("<h2>Deep</h2>" + "<div><span>" * 20_000 + "deep text" + "</span></div>" * 20_000).encode()
    assert parse_document("deep.html", deep, max_bytes=LIMIT).text == "## Deep\n\ndeep text"
    # Unclosed paragraphs, list items and table cells by the thousand, stray end tags, unclosed inline tags: every
    # word is kept.
    parts = ["<p>para", "<li>item", "</div>", "</p>", "<b>", "</ul>", "<td>", "<tr>", "&amp;", "<pre>", "</pre>"]
    noise = "".join(rng.choice(parts) + f" w{i} " for i in range(5_000))
    text = parse_document("noise.html", noise.encode(), max_bytes=LIMIT).text
    words = set(re.findall(r"w\d+", text))
    assert all(f"w{i}" in words for i in range(5_000))
