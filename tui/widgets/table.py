"""A DataTable that is redrawn from a list of keyed rows, touching only what changed.

Views rebuild their rows from the model on every refresh. Re-adding 500 rows each
second would dominate the frame, so `show` compares with what is on screen: same keys
in the same order → update only the cells whose content differs; otherwise rebuild once
and put the cursor back on the row it was on.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

__all__ = ["Cell", "Column", "KeyedTable", "Row"]

Cell = str | Text
Row = tuple[str, tuple[Cell, ...]]
Column = tuple[str, str, int | None]  # key, label, fixed width (None: fit content)


class KeyedTable(DataTable[Cell]):
    """Row-cursor table whose rows are replaced wholesale by `show`.

    Rows live at positional DataTable keys; the logical keys are kept beside them. A
    re-sort (every metrics poll, on a CPU-sorted table) then costs cell updates on
    the rows that moved instead of clearing and re-adding 500 rows.
    """

    COLUMNS: Sequence[Column] = ()

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False)
        self._keys: list[str] = []
        self._cells: list[tuple[Cell, ...]] = []

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

    def show(self, rows: Sequence[Row]) -> None:
        keep = self.current_key
        columns = [key for key, _, _ in self.COLUMNS]
        shared = min(len(rows), len(self._cells))
        for index in range(shared):
            cells, old = rows[index][1], self._cells[index]
            if cells == old:
                continue
            for column, new, previous in zip(columns, cells, old, strict=True):
                if new != previous:
                    self.update_cell(str(index), column, new)
        for index in range(len(self._cells) - 1, len(rows) - 1, -1):
            self.remove_row(str(index))
        for index in range(len(self._cells), len(rows)):
            self.add_row(*rows[index][1], key=str(index))
        self._keys = [key for key, _ in rows]
        self._cells = [cells for _, cells in rows]
        if keep is not None and keep in self._keys:
            wanted = self._keys.index(keep)
            if wanted != self.cursor_row:
                self.move_cursor(row=wanted, animate=False)
