"""What a reader sees of rendered markdown: the text a browser shows for an HTML fragment."""

from __future__ import annotations

from html.parser import HTMLParser


class _Text(HTMLParser):
    """Entities decoded, tags dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def shown(html: str) -> str:
    """The text of `html` as a browser shows it (before layout: white space as written)."""
    parser = _Text()
    parser.feed(html)
    return "".join(parser.parts)
