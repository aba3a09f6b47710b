// Package bedrock is a model.Model over Amazon Bedrock's Converse API, through the
// official aws-sdk-go-v2 bedrockruntime client.
//
// Request mapping: System becomes system[].text; user messages become user
// messages with text blocks; assistant messages become text and toolUse blocks;
// tool results (role "tool") become toolResult blocks of a user message (status
// "error" when IsError). Consecutive messages of the same Converse role are merged,
// since Converse wants user and assistant to alternate. Tools become
// toolConfig.tools[].toolSpec with inputSchema.json; MaxTokens becomes
// inferenceConfig.maxTokens. The answer's text blocks are joined, toolUse blocks
// become ToolCalls, stopReason and usage are copied.
//
// Retries are the SDK's: NewClient configures its standard retryer with at most
// three attempts (throttling, 5xx and connection errors) and this package never
// retries on top of it. Request.Timeout (default two minutes) bounds the whole
// call. SDK errors are mapped to model's Reason categories by error code and HTTP
// status only; the service's message text is never copied into the error.
package bedrock
