"""The interactive `logwatch top`: a Textual app showing `render.py`'s renderables, refreshed every
`--interval` seconds, driven by keys alone (`render.KEYS`)."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, Static

from .board import Board
from .render import SORTS, Row, Shown, detail, flat_rows, fleet_text, help_table, rows_table, status_text
from .view import ServerView

_FOOTER = "q quit  ? help  s sort  / filter  enter detail  p pause  \u2190 \u2192 time"


class TopApp(App[None]):
    AUTO_FOCUS = None  # the filter box takes the keys only once `/` opens it
    CSS = """
    Screen { overflow: hidden; }
    #fleet { height: 1; }
    #table { height: 1fr; }
    #pane { height: 2fr; display: none; border-top: solid $accent; }
    #filter { dock: bottom; display: none; height: 3; }
    #keys { dock: bottom; height: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("s", "sort", "sort"),
        Binding("slash", "filter", "filter"),
        Binding("enter,d", "detail", "detail"),
        Binding("p,space", "pause", "pause"),
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("left", "step(-1)", "back", show=False),
        Binding("right", "step(1)", "forward", show=False),
        Binding("end", "live", "now", show=False),
        Binding("escape", "close", "close", show=False),
    ]

    def __init__(self, board: Board, *, interval: float, step: float, shown: Shown) -> None:
        super().__init__()
        self.board = board
        self.interval = interval
        self.step_seconds = step
        self.shown = shown
        self.views: list[ServerView] = []
        self.rows: list[Row] = []
        self.first = 0
        self._stepping = False
        self._painted: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="fleet")
        yield Static(id="table")
        yield Static(id="pane")
        yield Input(placeholder="filter: a word of the server, model or state", id="filter")
        yield Static(_FOOTER, id="keys")

    def on_mount(self) -> None:
        self.set_interval(self.interval, self.tick)
        self.tick()

    def tick(self) -> None:
        if self.shown.paused:
            return
        self.views = self.board.refresh()
        self.draw()

    def on_resize(self, _event: events.Resize) -> None:
        self.draw()

    def draw(self) -> None:
        width, height = self.size.width, self.size.height
        self.shown.at_label = (f"at {datetime.fromtimestamp(self.board.at):%Y-%m-%d %H:%M:%S}"
                               if self.board.at is not None else "")
        if self._stepping:
            self.shown.at_label += " (reading...)"
        self.rows = flat_rows(self.views, self.shown)
        self.shown.selected = max(0, min(self.shown.selected, len(self.rows) - 1))
        pane_open = self.shown.detail or self.shown.help
        table_height = max(3, (height - 2) // 3 + 1) if pane_open else max(2, height - 2)
        limit = max(1, table_height - 1)
        if self.shown.selected < self.first:
            self.first = self.shown.selected
        elif self.shown.selected >= self.first + limit:
            self.first = self.shown.selected - limit + 1
        self.first = max(0, min(self.first, max(0, len(self.rows) - limit)))
        self._paint("#fleet", fleet_text(self.views, self.shown, width, status=False))
        keys = Text(status_text(self.shown) + "  ", style="bold", no_wrap=True, overflow="ellipsis")
        keys.append(_FOOTER, style="dim")
        keys.truncate(width, overflow="ellipsis")
        self._paint("#keys", keys)
        if self._painted.get("height") != table_height:
            self._painted["height"] = table_height
            self.query_one("#table", Static).styles.height = table_height
        self._paint("#table", rows_table(self.rows, width, selected=self.shown.selected, first=self.first,
                                         limit=limit))
        pane = self.query_one("#pane", Static)
        if self._painted.get("pane") != pane_open:
            self._painted["pane"] = pane_open
            pane.styles.display = "block" if pane_open else "none"
        if self.shown.help:
            pane.update(help_table())
        elif self.shown.detail and self.rows:
            pane.update(detail(self.rows[self.shown.selected].view))
        elif self.shown.detail:
            pane.update("no row selected")

    def _paint(self, widget: str, text: Text) -> None:
        """Update a line or the table only when it changed: Textual then paints nothing."""
        if self._painted.get(widget) != text:
            self._painted[widget] = text
            self.query_one(widget, Static).update(text)

    # -- keys -------------------------------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        """Any key closes the help."""
        if self.shown.help and event.key != "question_mark":
            self.shown.help = False
            event.prevent_default()
            event.stop()
            self.draw()

    def action_help(self) -> None:
        self.shown.help = not self.shown.help
        self.draw()

    def action_sort(self) -> None:
        orders = list(SORTS)
        self.shown.sort = orders[(orders.index(self.shown.sort) + 1) % len(orders)]
        self.draw()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = self.shown.filter
        box.styles.display = "block"
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.shown.filter = event.value.strip()
        self.shown.selected = 0
        event.input.styles.display = "none"
        self.set_focus(None)
        self.draw()

    def action_detail(self) -> None:
        self.shown.detail = not self.shown.detail
        self.draw()

    def action_pause(self) -> None:
        self.shown.paused = not self.shown.paused
        if not self.shown.paused:
            self.views = self.board.refresh()
        self.draw()

    def action_move(self, delta: int) -> None:
        self.shown.selected = max(0, min(self.shown.selected + delta, len(self.rows) - 1))
        self.draw()

    def action_close(self) -> None:
        box = self.query_one("#filter", Input)
        if box.styles.display != "none":
            box.styles.display = "none"
            self.set_focus(None)
        self.shown.detail = self.shown.help = False
        self.draw()

    def action_step(self, direction: int) -> None:
        if self._stepping or not self.board.logs or self.board.remake is None:
            return
        self._stepping = True
        self.draw()
        self._move_in_time(direction * self.step_seconds)

    def action_live(self) -> None:
        if self.board.at is not None and not self._stepping:
            self._stepping = True
            self._move_in_time(float("inf"))

    @work(thread=True, exclusive=True)
    def _move_in_time(self, seconds: float) -> None:
        try:
            self.board.step(seconds)
        finally:
            self._stepping = False
            self.call_from_thread(self._after_step)

    def _after_step(self) -> None:
        self.views = self.board.all()
        self.draw()
