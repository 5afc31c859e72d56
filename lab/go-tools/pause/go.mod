// The lab's pod sandbox program (lab/realnodes.py): written here, no dependencies.
module loadwise.dev/lab/pause

go 1.26.0
