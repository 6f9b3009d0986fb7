"""The Textual views: the dashboard app (app.py), replay (replay.py), the compare screen
(screens/compare.py), their widgets and styles. Every module here imports Textual; what the
views show comes from the live model (neurotui.live), formatted by neurotui.fmt, with text from
the session made safe by neurotui.textsafe and charts drawn by neurotui.charts.
"""
