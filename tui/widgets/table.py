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
from textual.widgets.data_table import RowDoesNotExist

__all__ = ["Column", "KeyedTable", "Row"]

Cell = str | Text
Row = tuple[str, tuple[Cell, ...]]
Column = tuple[str, str, int | None]  # key, label, fixed width (None: fit content)


class KeyedTable(DataTable[Cell]):
    """Row-cursor table whose rows are replaced wholesale by `show`."""

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
        """Key of the row under the cursor, if any."""
        if not self._keys or not 0 <= self.cursor_row < len(self._keys):
            return None
        return self._keys[self.cursor_row]

    def show(self, rows: Sequence[Row]) -> None:
        keys = [key for key, _ in rows]
        columns = [key for key, _, _ in self.COLUMNS]
        if keys == self._keys:
            for (key, cells), old in zip(rows, self._cells, strict=True):
                if cells == old:
                    continue
                for column, new, previous in zip(columns, cells, old, strict=True):
                    if new != previous:
                        self.update_cell(key, column, new)
        else:
            keep = self.current_key
            self.clear()
            for key, cells in rows:
                self.add_row(*cells, key=key)
            if keep is not None:
                try:
                    self.move_cursor(row=self.get_row_index(keep), animate=False)
                except RowDoesNotExist:
                    pass
        self._keys = keys
        self._cells = [cells for _, cells in rows]
