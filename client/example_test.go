package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// The examples need a running server ("stint dev"), so they are compiled but not run.

func ExampleNew() {
	// Two servers of one cluster: the client moves to the second when the first is down.
	c, err := client.New("http://10.0.0.1:8080,http://10.0.0.2:8080",
		client.WithToken(os.Getenv("STINT_TOKEN")),
		client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Ready(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_CreateJob() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	backoff := apitype.Duration(10 * time.Second)
	resp, created, err := c.CreateJob(ctx, &apitype.JobSpec{
		Name:           "nightly-report",
		Command:        []string{"./report", "--since", "24h"},
		Queue:          "reports",
		Requirements:   &apitype.Requirements{CPU: 1, MemoryMB: 512},
		Retry:          &apitype.RetryPolicy{MaxAttempts: 3, InitialDelay: &backoff},
		IdempotencyKey: "report-2030-01-01",
	})
	var p *apitype.Problem
	if errors.As(err, &p) {
		// A 4xx answer names the fields that are wrong.
		for _, fe := range p.Errors {
			fmt.Printf("%s: %s\n", fe.Field, fe.Message)
		}
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	if !created {
		fmt.Println("submitted before, nothing new")
	}
	fmt.Println("run", resp.Run.ID)
}

func ExampleClient_WaitRun() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	resp, _, err := c.CreateJob(ctx, &apitype.JobSpec{Shell: "sleep 1; echo done"})
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.WaitRun(ctx, resp.Run.ID, client.Finished)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status)
}

func ExampleClient_Logs() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	logs, err := c.Logs(ctx, "RUN_ID", client.LogsOptions{Follow: true})
	if err != nil {
		log.Fatal(err)
	}
	defer logs.Close()
	if _, err := io.Copy(os.Stdout, logs); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_ListRuns() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	// Every failed run of a job, page by page.
	opts := client.ListRunsOptions{Job: "nightly-report", Status: "failed", Limit: 100}
	for {
		page, err := c.ListRuns(ctx, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range page.Items {
			fmt.Println(r.ID, r.Error)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
}

func ExampleClient_UpdateQueue() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	paused := true
	if _, err := c.UpdateQueue(ctx, "reports", &apitype.QueuePatch{Paused: &paused}); err != nil {
		log.Fatal(err)
	}
}
