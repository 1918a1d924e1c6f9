module github.com/delegatelab/delegate

go 1.26.0
