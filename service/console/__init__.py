"""The web console for operators, served by `tailtune serve` at `/` (docs/console.md): Jinja2 pages rendered by the
app, plotly figures, htmx for live parts; it calls the service functions the API's routers call."""
