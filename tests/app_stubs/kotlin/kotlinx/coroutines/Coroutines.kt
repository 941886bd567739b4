// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. kotlinx.coroutines
// (org.jetbrains.kotlinx:kotlinx-coroutines-android), with only what the templates call, as its API reference declares
// it: https://kotlinlang.org/api/kotlinx.coroutines/kotlinx-coroutines-core/kotlinx.coroutines/
package kotlinx.coroutines

import kotlin.coroutines.CoroutineContext

// https://kotlinlang.org/api/kotlinx.coroutines/kotlinx-coroutines-core/kotlinx.coroutines/-coroutine-scope/
interface CoroutineScope {
    val coroutineContext: CoroutineContext
}

// https://kotlinlang.org/api/kotlinx.coroutines/kotlinx-coroutines-core/kotlinx.coroutines/-coroutine-dispatcher/
abstract class CoroutineDispatcher : CoroutineContext.Element

// https://kotlinlang.org/api/kotlinx.coroutines/kotlinx-coroutines-core/kotlinx.coroutines/-dispatchers/
object Dispatchers {
    // https://kotlinlang.org/api/kotlinx.coroutines/kotlinx-coroutines-core/kotlinx.coroutines/-dispatchers/-default.html
    @JvmStatic val Default: CoroutineDispatcher get() = throw UnsupportedOperationException("stub")
}

// https://kotlinlang.org/api/kotlinx.coroutines/kotlinx-coroutines-core/kotlinx.coroutines/with-context.html
suspend fun <T> withContext(context: CoroutineContext, block: suspend CoroutineScope.() -> T): T =
    throw UnsupportedOperationException("stub")
