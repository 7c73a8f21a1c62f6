module byok.local/pause

go 1.24
