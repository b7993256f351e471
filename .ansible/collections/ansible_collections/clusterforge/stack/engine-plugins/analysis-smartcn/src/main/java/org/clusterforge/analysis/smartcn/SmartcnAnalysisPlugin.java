package org.clusterforge.analysis.smartcn;

import java.util.Map;
import org.apache.lucene.analysis.Analyzer;
import org.opensearch.index.analysis.AnalyzerProvider;
import org.opensearch.index.analysis.TokenFilterFactory;
import org.opensearch.index.analysis.TokenizerFactory;
import org.opensearch.indices.analysis.AnalysisModule.AnalysisProvider;
import org.opensearch.plugins.AnalysisPlugin;
import org.opensearch.plugins.Plugin;

/**
 * Registers Lucene's Smart Chinese analysis under the names the official analysis-smartcn
 * plugin uses, so that an index mapping written for one works unchanged with the other.
 */
public final class SmartcnAnalysisPlugin extends Plugin implements AnalysisPlugin {

    /** The analyzer: word segmentation plus the default punctuation stop set. */
    public static final String ANALYZER = "smartcn";

    /** The tokenizer alone, for custom analyzers. */
    public static final String TOKENIZER = "smartcn_tokenizer";

    /** The stop filter; its default word list is {@code _smartcn_}. */
    public static final String STOP_FILTER = "smartcn_stop";

    /**
     * Deprecated alias of {@link #TOKENIZER} that the official plugin still accepts; kept so
     * that older mappings move over too.
     */
    public static final String LEGACY_TOKENIZER = "smartcn_sentence";

    /**
     * Deprecated no-op filter that the official plugin still accepts (segmentation moved into
     * the tokenizer long ago); kept so that older mappings move over too.
     */
    public static final String LEGACY_WORD_FILTER = "smartcn_word";

    @Override
    public Map<String, AnalysisProvider<AnalyzerProvider<? extends Analyzer>>> getAnalyzers() {
        return Map.of(ANALYZER, SmartcnAnalyzerProvider::new);
    }

    @Override
    public Map<String, AnalysisProvider<TokenizerFactory>> getTokenizers() {
        return Map.of(
                TOKENIZER, SmartcnTokenizerFactory::new,
                LEGACY_TOKENIZER, SmartcnTokenizerFactory::new);
    }

    @Override
    public Map<String, AnalysisProvider<TokenFilterFactory>> getTokenFilters() {
        return Map.of(
                STOP_FILTER, SmartcnStopTokenFilterFactory::new,
                LEGACY_WORD_FILTER, SmartcnWordTokenFilterFactory::new);
    }
}
