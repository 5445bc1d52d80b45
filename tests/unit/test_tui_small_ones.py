def test_outside_text_keeps_its_brackets_in_markup():
    """enroot's `[INFO] Querying registry` lost its `[INFO]` in the form's status line:
    rich's escape leaves upper-case tags alone and Textual's markup drops them."""
    from textual.content import Content

    from hpcui.tui.markup import escape

    for text in ("[INFO] Querying registry", "a [red] b", "[E] x [/]", "C:\\dir\\", "plain"):
        assert Content.from_markup(f"[red]{escape(text)}[/]").plain.rstrip() == text
