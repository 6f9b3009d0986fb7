# The native looker's interface (_looker.c; built at install where a C compiler is there).

Taken = list[tuple[int, list[tuple[int, float]], int, int, int, float]]
"""Per log grown: (index, its looks' (size, stamp), changes, first and last write ns, grew_at)."""

class Looker:
    passes: int
    shared: int
    def set_logs(self, logs: list[tuple[int, int, float]], /) -> Taken:
        """ValueError: a descriptor or size below 0, a time NaN or +inf. After close(), logs
        start the thread again."""
    def set_interval(self, seconds: float, /) -> None:
        """0 (no looks) or 0.001 to 3600 seconds; ValueError otherwise (NaN, infinite)."""
    def take(self) -> Taken: ...
    def close(self) -> None:
        """Idempotent; from two threads at once, both return once the thread has ended."""

def read_looked(fd: int, offset: int, most: int, looks: list[tuple[int, float]], /,
                ) -> tuple[bytes, list[float], int]:
    """ValueError: a descriptor past an int or below 0, an offset, most or size below 0."""
