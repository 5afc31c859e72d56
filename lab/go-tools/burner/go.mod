// The lab's load burner (a workload for the real-node cluster): written here, no dependencies.
module loadwise.dev/lab/burner

go 1.26.0
