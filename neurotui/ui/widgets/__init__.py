"""Dashboard panels, one module per area; each renders a frozen state from ui.model."""
