// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. DJL's Hugging Face
// tokenizers binding (ai.djl.huggingface:tokenizers), with only what the ExecuTorch templates call, as its Javadoc
// declares it: https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/index.html
package ai.djl.huggingface.tokenizers

import ai.djl.huggingface.tokenizers.jni.CharSpan
import java.nio.file.Path

// https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/HuggingFaceTokenizer.html
class HuggingFaceTokenizer private constructor() : AutoCloseable {
    companion object {
        // https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/HuggingFaceTokenizer.html#builder()
        @JvmStatic fun builder(): Builder = throw UnsupportedOperationException("stub")
    }

    // https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/HuggingFaceTokenizer.html#encode(java.lang.String)
    fun encode(text: String): Encoding = throw UnsupportedOperationException("stub")

    override fun close() {}

    // https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/HuggingFaceTokenizer.Builder.html
    class Builder private constructor() {
        fun optTokenizerPath(tokenizerPath: Path): Builder = this
        fun optMaxLength(maxLength: Int): Builder = this
        fun optTruncation(enabled: Boolean): Builder = this
        fun optAddSpecialTokens(addSpecialTokens: Boolean): Builder = this
        fun build(): HuggingFaceTokenizer = throw UnsupportedOperationException("stub")
    }
}

// https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/Encoding.html
class Encoding private constructor() {
    // https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/Encoding.html#getIds()
    val ids: LongArray get() = throw UnsupportedOperationException("stub")
    // https://javadoc.io/doc/ai.djl.huggingface/tokenizers/latest/ai/djl/huggingface/tokenizers/Encoding.html#getCharTokenSpans()
    val charTokenSpans: Array<CharSpan> get() = throw UnsupportedOperationException("stub")
}
