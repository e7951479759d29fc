"""One way to show a token everywhere: whitespace visible, runs compacted, width capped (no model)."""

from specdec.views.charts.style import token_names
from specdec.views.tokens import MAX_TOKEN_CHARS, capped, visible_text


def test_whitespace_is_visible_and_runs_are_counted():
    assert visible_text(" a\n\tb") == "␣a↵⇥b"
    assert visible_text("\n" + " " * 25) == "↵␣×25"
    assert visible_text("\n\n\n\n") == "↵×4"
    assert visible_text("  x") == "␣␣x"  # two in a row stay as two marks
    assert visible_text("\x00" * 20) == "<0x00>×20"
    assert visible_text("word") == "word"


def test_a_count_is_never_followed_by_a_digit():
    assert visible_text("   5") == "␣␣␣5"  # "␣×35" would read as 35 spaces
    assert visible_text("   x") == "␣×3x"


def test_long_labels_are_cut_between_marks():
    assert capped("a" * 40) == "a" * (MAX_TOKEN_CHARS - 1) + "…"
    assert len(capped("a" * 40)) == MAX_TOKEN_CHARS
    assert capped("short") == "short"
    cut = capped("<0xE2><0x80><0x9C><0xE2>", 14)  # never half a byte mark
    assert cut == "<0xE2><0x80>…"
    cut = capped("abcdefghijkl␣×25", 14)  # never half a count
    assert cut == "abcdefghijkl…"


def test_chart_categories_are_capped_escaped_and_unique():
    labels = {1: "<b>" + "x" * 30, 2: visible_text("\n" + " " * 25), 3: "same", 4: "same"}
    names = token_names([1, 2, 3, 4], labels)
    assert names[0].startswith("&lt;b&gt;") and names[0].endswith("…")
    assert names[1] == "↵␣×25"
    assert names[2] == "same" and names[3] == "same #4"
    assert token_names([1], labels, width=40)[0].endswith("x")  # a wider cap where a chart has room


def test_special_tokens_and_pieces_read_as_words_and_are_never_cut():
    from specdec.views.tokens import capped, piece_label, special_label

    assert special_label("<|im_end|>") == "⟨end·of·answer⟩"
    assert special_label("<|fim_prefix|>") == "⟨fim·prefix⟩"  # an unknown one: its name, without <| |>
    long_piece = piece_label([0xF0, 0x9F, 0x98])
    assert long_piece == "⟨piece·F0·9F·98⟩" and capped(long_piece, 12) == long_piece
    assert capped("ab⟨piece·F0⟩cdefghijkl", 13) == "ab⟨piece·F0⟩…"  # cut after the mark, not in it
    assert capped("ab⟨piece·F0⟩cdefghijkl", 12) == "ab…"
