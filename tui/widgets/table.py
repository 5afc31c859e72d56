"""A DataTable redrawn from an ordered list of keys, building only the rows in view.

Views hand `show` the keys in display order and a function that builds one row's cells.
After a metrics poll every node's figures change and a CPU-sorted table re-orders, so
building and writing all 500 rows (5,000 cells) per poll cost about half a second
(benchmarks/tui_scale.py). Only the rows on screen (plus a small margin) are built and
their changed cells written; the others are marked out of date and built when they
scroll into view. Rows keep positional DataTable keys; the logical keys live beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widgets import DataTable

__all__ = ["Cell", "Column", "KeyedTable", "Row"]

Cell = Text
"""Never a `str`: DataTable reads a `str` cell as Rich markup, and cells hold cluster text."""
Cells = tuple[Cell, ...]
Row = tuple[str, Cells]
Column = tuple[str, str, int | None]  # key, label, fixed width (None: fit content)


def _no_row(key: str) -> Cells:  # pragma: no cover - replaced by the first `show`
    raise KeyError(key)


class KeyedTable(DataTable[Cell]):
    """Row-cursor table whose rows are replaced wholesale by `show` / `show_keys`.

    The DataTable's own cells are only guaranteed current for rows in view: read rows
    through `key_at` and `cells_at`, which build an out-of-date row on demand.
    """

    COLUMNS: Sequence[Column] = ()
    MARGIN = 4
    """Rows built beyond each edge of the view, so a short scroll finds them ready."""

    visible_only = True
    """False builds every row on each `show` (the old path; kept for the benchmark)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False)
        self._keys: list[str] = []
        self._cells: list[Cells] = []  # what the DataTable holds at each position
        self._fresh: list[bool] = []  # position shows what `_build` gives now
        self._build: Callable[[str], Cells] = _no_row
        self.built = 0
        """Rows built since mount: lets tests check that a refresh stays in view."""

    def on_mount(self) -> None:
        for key, label, width in self.COLUMNS:
            self.add_column(label, key=key, width=width)

    @property
    def current_key(self) -> str | None:
        """Logical key of the row under the cursor, if any."""
        if not self._keys or not 0 <= self.cursor_row < len(self._keys):
            return None
        return self._keys[self.cursor_row]

    def key_at(self, index: int) -> str:
        return self._keys[index]

    def cells_at(self, index: int) -> Cells:
        """The current cells of the row at `index`, in view or not."""
        self._refresh_rows(range(index, index + 1))
        return self._cells[index]

    def show(self, rows: Sequence[Row]) -> None:
        """Show rows already built (small tables: the feed, a node's pods)."""
        built = dict(rows)
        self.show_keys([key for key, _ in rows], built.__getitem__)

    def show_keys(self, keys: Sequence[str], build: Callable[[str], Cells]) -> None:
        """Show `keys` in this order; `build(key)` gives a row's cells when it is needed."""
        keep = self.current_key
        self._build = build
        old = len(self._cells)
        # Our lists first: a scroll during the DataTable calls below refreshes the view,
        # and must see positions that agree with the rows (see `_refresh_rows`).
        self._keys = list(keys)
        self._fresh = [False] * len(keys)
        del self._cells[len(keys) :]
        for index in range(old - 1, len(keys) - 1, -1):
            self.remove_row(str(index))
        # New rows are built now: DataTable measures fit-content columns on add_row.
        for index in range(old, len(keys)):
            cells = self._make(index)
            self.add_row(*cells, key=str(index))
            self._cells.append(cells)
        if keep is not None and keep in self._keys:
            wanted = self._keys.index(keep)
            if wanted != self.cursor_row:
                self.move_cursor(row=wanted, animate=False)
        if self.visible_only:
            self._refresh_view()
        else:
            self._refresh_rows(range(len(keys)))

    def _make(self, index: int) -> Cells:
        self.built += 1
        self._fresh[index] = True
        return self._build(self._keys[index])

    def _in_view(self) -> range:
        """Row positions on screen, plus MARGIN each side (the header does not scroll).

        Before the first layout the height is 0: the resize that follows fills the view.
        """
        top = int(self.scroll_y)
        height = max(0, self.size.height - (self.header_height if self.show_header else 0))
        return range(max(0, top - self.MARGIN), min(top + height + self.MARGIN, len(self._keys)))

    def _refresh_view(self) -> None:
        self._refresh_rows(self._in_view())
        # The cursor's row too: it may be off the view until move_cursor's scroll lands
        # (which refreshes the view again through watch_scroll_y).
        if 0 <= self.cursor_row < len(self._keys):
            self._refresh_rows(range(self.cursor_row, self.cursor_row + 1))

    def _refresh_rows(self, positions: range) -> None:
        columns = [key for key, _, _ in self.COLUMNS]
        for index in positions:
            if index >= len(self._cells) or self._fresh[index]:
                continue  # a row not added yet is built when it is added
            cells, old = self._make(index), self._cells[index]
            if cells == old:
                continue
            for column, new, previous in zip(columns, cells, old, strict=True):
                if new != previous:
                    self.update_cell(str(index), column, new)
            self._cells[index] = cells

    def on_resize(self) -> None:
        self._refresh_view()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._refresh_view()
