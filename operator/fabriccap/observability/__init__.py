"""Alert rules and the Grafana dashboard, declared once in Python and rendered to files."""
