"""Screens: the dashboard, its help, and the stop confirmation."""
