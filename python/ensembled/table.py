"""Table: named columns of equal length, what the package hands back for a run's rounds, a
round's members and a batch of predictions.

table[name] is a column (a numpy array); table.columns the names in order; len(table) the
rows; table.rows() a dict a row; table.to_pandas() a DataFrame (pandas is optional: without it
that one call raises ImportError saying how to install it). Immutable by convention; pure.
"""
import numpy as np


class Table:
    def __init__(self, columns, data):
        self.columns = list(columns)
        self._data = {c: _column(data[c]) for c in self.columns}
        lengths = {len(v) for v in self._data.values()}
        if len(lengths) > 1:
            raise ValueError("columns of different lengths: %s" % sorted(lengths))

    def __getitem__(self, column):
        return self._data[column]

    def __contains__(self, column):
        return column in self._data

    def __len__(self):
        return len(self._data[self.columns[0]]) if self.columns else 0

    def rows(self):
        return [{c: self._data[c][i].item() for c in self.columns} for i in range(len(self))]

    def to_pandas(self):
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Table.to_pandas needs pandas: pip install 'ensembled[pandas]' (or pip install pandas)") from e
        return pandas.DataFrame({c: self._data[c] for c in self.columns}, columns=self.columns)

    def __repr__(self):
        width = {c: max([len(c)] + [len(_cell(v)) for v in self._data[c]]) for c in self.columns}
        lines = ["  ".join(c.rjust(width[c]) for c in self.columns)]
        lines += ["  ".join(_cell(self._data[c][i]).rjust(width[c]) for c in self.columns) for i in range(len(self))]
        return "\n".join(lines)


def _column(values):
    """An array of the values; Python ints stay exact (a member's seed is a u64: int64, else
    uint64, where numpy alone would make floats of them)."""
    if isinstance(values, np.ndarray):
        return values
    values = list(values)
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        for dtype in (np.int64, np.uint64):
            try:
                return np.array(values, dtype=dtype)
            except OverflowError:
                pass
        return np.array(values, dtype=object)
    return np.asarray(values)


def _cell(v):
    if isinstance(v, (float, np.floating)):
        return "%.6g" % v
    return str(v)
