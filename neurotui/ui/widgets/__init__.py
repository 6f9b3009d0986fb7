"""Dashboard panels, one module per area; each renders a frozen state from neurotui.live.model."""
