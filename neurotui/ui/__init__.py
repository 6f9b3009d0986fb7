"""The live dashboard: a Textual app over one session folder (see app.py).

UI-free parts (clock, model, alerts, history, log tail, text safety, formatting) sit beside
the Textual parts so they can be tested and reused without a terminal.
"""
