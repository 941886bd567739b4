// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. DJL's character span of
// a token: https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/jni/CharSpan.html
package ai.djl.huggingface.tokenizers.jni

class CharSpan(val start: Int, val end: Int)  // getStart(), getEnd(): the span's character offsets
