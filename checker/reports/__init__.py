"""Reports for people: per-step ownership charts (chart.py) and the `kvmc show` terminal and HTML
renderings (html.py). Imports traces and the model's concrete interpretation only."""
