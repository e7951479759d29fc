"""What the pages draw, as plain data and figures: no Streamlit and no torch here.

    stepper.py       one run stepped by hand: the round-by-round view's state
    playback.py      Round by round's playback: the stage shown, what a click or a timer beat does
    kvcache.py       the two KV caches of a round, as cells to draw
    quiz.py          student mode: judging a prediction against the round
    tokens.py        tokens as readable labels
    links.py         shared links: settings read from a URL, every change said
    numbers.py       figures in 2-3 significant digits, p-values as a page writes them
    prompt_kinds.py  code vs prose in words: kinds of text, the quiz and its feedback
    engine_words.py  a run's figures in the words vLLM, llama.cpp and SGLang print
    draft_length.py  why a round drafted as many tokens as it did, in words
    tree_view.py     a tree round: each node's verdict, its place in a drawing, the attention mask, the
                     sibling-by-sibling test as steps
    class_questions.py  the questions the lesson puts to the whole room, and their measured answers
    memory.py        the server's memory per load, in words (Variants)
    charts/          chart builders, one module per page: records in, figures out
"""
