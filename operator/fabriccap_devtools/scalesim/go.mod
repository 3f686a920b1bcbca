module fabriccap.dev/scalesim

go 1.25.0
